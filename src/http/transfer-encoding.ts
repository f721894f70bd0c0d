/**
 * The `Transfer-Encoding` of a request when it is anything but `chunked` alone (in any letter case), else
 * undefined. Node's parser de-chunks a body whose last coding is `chunked` and passes the others by: the body of
 * `gzip, chunked` would reach the app still compressed, and a proxy in front that reads the codings otherwise
 * may have framed the same bytes differently. Headers repeated are one list to Node (`gzip, chunked`).
 */
export function unsupportedTransferEncoding(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return header.length === 7 && header.toLowerCase() === 'chunked' ? undefined : header;
}

export const unsupportedTransferEncodingMessage = (header: string) =>
  `transfer-encoding ${header.slice(0, 64)} is not supported: send the body with chunked alone or a Content-Length`;
