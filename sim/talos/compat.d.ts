/** target minor (`1.13`) -> [MinimumHostUpgradeVersion (inclusive), MaximumHostDowngradeVersion (exclusive)] */
export const HOST_RANGES: Record<'1.10' | '1.11' | '1.12' | '1.13', [string, string]>
/** `v1.12.11` -> its core numbers and its text as Go's semver prints it, or null */
export function parseTag(tag: string): { core: [number, number, number]; text: string } | null
/** null, or the installer's refusal of an upgrade from `hostTag` to `targetTag` (its exact text) */
export function upgradeRefusal(hostTag: string, targetTag: string): string | null
