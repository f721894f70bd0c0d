/** Levenshtein distance, small strings only (config keys). */
export function editDistance(a: string, b: string): number {
  const previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = previous[0]!;
    previous[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = previous[j]!;
      previous[j] = Math.min(above + 1, previous[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return previous[b.length]!;
}

/**
 * The closest candidate to `input`, when close enough to be a plausible typo. Candidates are full
 * dotted paths so a key put in the wrong section (`health.maxRssMb`) finds its real home.
 */
export function closestMatch(input: string, candidates: readonly string[]): string | undefined {
  const lower = input.toLowerCase();
  const lastSegment = lower.split('.').pop()!;
  let best: { candidate: string; score: number } | undefined;
  for (const candidate of candidates) {
    const candidateLower = candidate.toLowerCase();
    const candidateLast = candidateLower.split('.').pop()!;
    const score = Math.min(
      editDistance(lower, candidateLower),
      candidateLast === lastSegment ? 1 : editDistance(lastSegment, candidateLast) + 1,
    );
    if (!best || score < best.score) best = { candidate, score };
  }
  if (!best) return undefined;
  const limit = Math.max(2, Math.floor(lastSegment.length / 3));
  return best.score <= limit ? best.candidate : undefined;
}
