/** What an instance metadata endpoint tells about this node; a field it does not report stays undefined. */
export interface InstanceMetadata {
  instanceId?: string;
  region?: string;
  zone?: string;
  publicIp?: string;
  privateIp?: string;
}

export type MetadataKind = 'aws' | 'gcp' | 'digitalocean';

const DEFAULT_URLS: Record<MetadataKind, string> = {
  aws: 'http://169.254.169.254',
  gcp: 'http://metadata.google.internal',
  digitalocean: 'http://169.254.169.254',
};

const MAX_FIELD_CHARS = 256;

type Get = (path: string, headers?: Record<string, string>) => Promise<string | undefined>;

/** A GET against the endpoint: 404 is "not reported" (an instance without a public address), other failures throw. */
function getter(base: string, signal: AbortSignal): Get {
  return async (path, headers = {}) => {
    const response = await fetch(new URL(path, base), { headers, signal, redirect: 'error' });
    if (response.status === 404) return undefined;
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    const text = (await response.text()).trim();
    return text && text.length <= MAX_FIELD_CHARS * 64 ? text : undefined;
  };
}

const field = (value: unknown): string | undefined => (typeof value === 'string' || typeof value === 'number' ? String(value).slice(0, MAX_FIELD_CHARS) || undefined : undefined);

/** IMDSv2: a session token first, then one path per field. */
async function aws(get: Get, base: string, signal: AbortSignal): Promise<InstanceMetadata> {
  const tokenResponse = await fetch(new URL('/latest/api/token', base), { method: 'PUT', headers: { 'x-aws-ec2-metadata-token-ttl-seconds': '60' }, signal, redirect: 'error' });
  if (!tokenResponse.ok) throw new Error(`/latest/api/token: HTTP ${tokenResponse.status}`);
  const headers = { 'x-aws-ec2-metadata-token': (await tokenResponse.text()).trim() };
  const [instanceId, region, zone, privateIp, publicIp] = await Promise.all(
    ['instance-id', 'placement/region', 'placement/availability-zone', 'local-ipv4', 'public-ipv4'].map((path) => get(`/latest/meta-data/${path}`, headers)),
  );
  return { instanceId: field(instanceId), region: field(region), zone: field(zone), privateIp: field(privateIp), publicIp: field(publicIp) };
}

async function gcp(get: Get): Promise<InstanceMetadata> {
  const headers = { 'metadata-flavor': 'Google' };
  const prefix = '/computeMetadata/v1/instance/';
  const [instanceId, zonePath, privateIp, publicIp] = await Promise.all(
    ['id', 'zone', 'network-interfaces/0/ip', 'network-interfaces/0/access-configs/0/external-ip'].map((path) => get(prefix + path, headers)),
  );
  // `projects/<number>/zones/europe-west1-b`: the region is the zone without its last letter.
  const zone = field(zonePath?.split('/').at(-1));
  return { instanceId: field(instanceId), zone, region: zone?.replace(/-[a-z]$/, ''), privateIp: field(privateIp), publicIp: field(publicIp) };
}

interface DigitalOceanInterface {
  ipv4?: { ip_address?: unknown };
}

async function digitalocean(get: Get): Promise<InstanceMetadata> {
  const text = await get('/metadata/v1.json');
  const document = text ? (JSON.parse(text) as { droplet_id?: unknown; region?: unknown; interfaces?: { public?: DigitalOceanInterface[]; private?: DigitalOceanInterface[] } }) : {};
  return {
    instanceId: field(document.droplet_id),
    region: field(document.region),
    publicIp: field(document.interfaces?.public?.[0]?.ipv4?.ip_address),
    privateIp: field(document.interfaces?.private?.[0]?.ipv4?.ip_address),
  };
}

/** Asks the endpoint of `kind` (at `url`, else its documented address) within `timeoutMs`. */
export async function fetchInstanceMetadata(kind: MetadataKind, url: string | undefined, timeoutMs: number): Promise<InstanceMetadata> {
  const base = url ?? DEFAULT_URLS[kind];
  const signal = AbortSignal.timeout(Math.max(1, timeoutMs));
  const get = getter(base, signal);
  if (kind === 'aws') return aws(get, base, signal);
  if (kind === 'gcp') return gcp(get);
  return digitalocean(get);
}
