type Json = Record<string, unknown>;

/** A name an object answers without holding it (`constructor`, `toString`, `__proto__`...). */
const inherited = (key: string) => key in Object.prototype;

/** A plain object of JSON data: made by `{}` or JSON.parse, and no own field shadowing an inherited one. */
function isPlainRecord(value: unknown): value is Json {
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false;
  return !Object.keys(value).some(inherited);
}

/** Strings, numbers, booleans, null, arrays of them and plain records of them. */
function isJsonData(value: unknown): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return true;
  if (Array.isArray(value)) return Object.getPrototypeOf(value) === Array.prototype && value.every(isJsonData);
  return isPlainRecord(value) && Object.values(value).every(isJsonData);
}

/** Deep equality of JSON data: arrays in order, records by their set of fields; NaN equals NaN. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b || Object.is(a, b)) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameJson(item, b[i]));
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && sameJson((a as Json)[key], (b as Json)[key]));
}

/** A path of field names only: no array index, no operator, nothing inherited, not `_id`. */
function fieldNames(path: string): string[] | undefined {
  if (path.includes('$')) return undefined;
  const names = path.split('.');
  if (names[0] === '_id' || names.some((name) => name === '' || /^\d+$/.test(name) || inherited(name))) return undefined;
  return names;
}

/**
 * `$set` done here when it is only field names into plain records (the store's commonest update, the servers'
 * inventory sections), so that update loads no update operators. It does what mingo's `$set` does with such
 * an update: each path in order, missing records on the way created, a field changed only when its value is
 * not deeply equal to the new one, which is copied one level deep. Returns whether the document changed, or
 * undefined when the update is anything else (other operators, array indexes, positional or conflicting
 * paths, `_id`, values that are not JSON data, a path through something other than a plain record): the
 * caller then hands it to mingo, which applies or refuses it.
 */
export function plainSet(document: Json, update: Record<string, unknown>): boolean | undefined {
  const operators = Object.keys(update);
  if (operators.length !== 1 || operators[0] !== '$set' || !isPlainRecord(document)) return undefined;
  const fields = update.$set;
  if (!isPlainRecord(fields)) return undefined;
  const paths: Array<[names: string[], value: unknown]> = [];
  for (const [path, value] of Object.entries(fields)) {
    const names = fieldNames(path);
    if (!names || !isJsonData(value)) return undefined;
    paths.push([names, value]);
  }
  // One path inside another (`a` and `a.b`) is a conflict mingo refuses.
  const joined = paths.map(([names]) => `${names.join('.')}.`);
  if (joined.some((path, i) => joined.some((other, j) => i !== j && other.startsWith(path)))) return undefined;
  for (const [names] of paths) {
    let node: unknown = document;
    for (const name of names.slice(0, -1)) {
      node = (node as Json)[name];
      if (node === undefined) break;
      if (!isPlainRecord(node)) return undefined;
    }
    const leaf = node === undefined ? undefined : (node as Json)[names[names.length - 1]!];
    if (leaf !== undefined && !isJsonData(leaf)) return undefined;
  }
  let changed = false;
  for (const [names, value] of paths) {
    let node = document;
    for (const name of names.slice(0, -1)) node = (node[name] ??= {}) as Json;
    const name = names[names.length - 1]!;
    if (sameJson(node[name], value)) continue;
    node[name] = Array.isArray(value) ? value.slice() : isPlainRecord(value) ? { ...value } : value;
    changed = true;
  }
  return changed;
}
