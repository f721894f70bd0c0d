export function withoutTracker(options: string | undefined): string | undefined;
