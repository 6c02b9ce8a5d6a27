// Versions for day 2 (issue 31, docs/day2-design.md 1.6, 1.8, 2.6): semver parsing, Talos's upgrade
// path and Kubernetes ranges per Talos minor as data, with Talos's own refusal texts, the Kubernetes
// path a talosctl's upgrade-k8s accepts, and the installer image an upgrade sends.
//
// The table is pkg/machinery/compatibility/talos1{2..13}/talos1*.go of siderolabs/talos v1.13.9 (the
// v1.12.11 tree holds the same rows and stops at talos112); the checks are compatibility/
// talos_version.go `UpgradeableFrom` and kubernetes_version.go `SupportedWith`. The installer that
// decides is the target's own (cmd/installer/pkg/install/preflight.go), so each target minor is
// judged by its own row.

/** A parsed version: `v1.12.11`, `1.13.0-alpha.2` (the `v` is optional, as semver.ParseTolerant allows it). */
export interface Version {
  major: number
  minor: number
  patch: number
  /** the pre-release part after `-` ('' for a release) */
  pre: string
}

const SEMVER =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/

/** `vX.Y.Z[-pre]`, undefined when the text is no such version (a TALOS_VERSION or TO the operator mistyped). */
export function parseVersion(text: string): Version | undefined {
  const m = SEMVER.exec(text.trim())
  if (!m) return undefined
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), pre: m[4] ?? '' }
}

/** As Go's semver `Version.String()` prints it, which Talos's texts use: no `v` (`1.12.11`, `1.13.0-alpha.2`). */
export function versionText(v: Version): string {
  return `${v.major}.${v.minor}.${v.patch}${v.pre ? `-${v.pre}` : ''}`
}

/** `1.13` */
export function minorOf(v: Version): string {
  return `${v.major}.${v.minor}`
}

/**
 * Major.minor.patch compared, the pre-release ignored, as Talos compares (`ordered.MakeTriple` of
 * the three numbers): negative when a < b.
 */
export function compareCore(a: Version, b: Version): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch
}

/** One row of the compatibility table: what a Talos minor's installer accepts and what Kubernetes it runs. */
export interface TalosCompat {
  /** `1.13` */
  minor: string
  /** the oldest host the installer of this minor upgrades (MinimumHostUpgradeVersion, inclusive) */
  minHost: string
  /** hosts at this version or newer are refused as a downgrade (MaximumHostDowngradeVersion, exclusive) */
  maxHostExclusive: string
  /** MinimumKubernetesVersion, inclusive */
  minKubernetes: string
  /** MaximumKubernetesVersion, exclusive (`1.36.99`: every 1.36 patch Kubernetes ships) */
  maxKubernetesExclusive: string
}

/** pkg/machinery/compatibility/talos1{2..13} (DeniedHostUpgradeVersions is empty in every row of both tags). */
export const TALOS_COMPATIBILITY: readonly TalosCompat[] = [
  { minor: '1.2', minHost: '1.0.0', maxHostExclusive: '1.3.0', minKubernetes: '1.23.0', maxKubernetesExclusive: '1.25.99' },
  { minor: '1.3', minHost: '1.0.0', maxHostExclusive: '1.5.0', minKubernetes: '1.24.0', maxKubernetesExclusive: '1.26.99' },
  { minor: '1.4', minHost: '1.0.0', maxHostExclusive: '1.6.0', minKubernetes: '1.25.0', maxKubernetesExclusive: '1.27.99' },
  { minor: '1.5', minHost: '1.2.0', maxHostExclusive: '1.7.0', minKubernetes: '1.26.0', maxKubernetesExclusive: '1.28.99' },
  { minor: '1.6', minHost: '1.3.0', maxHostExclusive: '1.8.0', minKubernetes: '1.24.0', maxKubernetesExclusive: '1.29.99' },
  { minor: '1.7', minHost: '1.4.0', maxHostExclusive: '1.9.0', minKubernetes: '1.25.0', maxKubernetesExclusive: '1.30.99' },
  { minor: '1.8', minHost: '1.5.0', maxHostExclusive: '1.10.0', minKubernetes: '1.26.0', maxKubernetesExclusive: '1.31.99' },
  { minor: '1.9', minHost: '1.8.0', maxHostExclusive: '1.11.0', minKubernetes: '1.27.0', maxKubernetesExclusive: '1.32.99' },
  { minor: '1.10', minHost: '1.8.0', maxHostExclusive: '1.12.0', minKubernetes: '1.28.0', maxKubernetesExclusive: '1.33.99' },
  { minor: '1.11', minHost: '1.9.0', maxHostExclusive: '1.13.0', minKubernetes: '1.29.0', maxKubernetesExclusive: '1.34.99' },
  { minor: '1.12', minHost: '1.10.0', maxHostExclusive: '1.14.0', minKubernetes: '1.30.0', maxKubernetesExclusive: '1.35.99' },
  { minor: '1.13', minHost: '1.11.0', maxHostExclusive: '1.15.0', minKubernetes: '1.31.0', maxKubernetesExclusive: '1.36.99' },
]

/** The newest Talos minor the table knows. */
export const NEWEST_KNOWN_TALOS = TALOS_COMPATIBILITY[TALOS_COMPATIBILITY.length - 1]!.minor

function rowOf(target: Version): TalosCompat | undefined {
  return TALOS_COMPATIBILITY.find((r) => r.minor === minorOf(target))
}

function must(text: string): Version {
  const v = parseVersion(text)
  if (!v) throw new Error(`not a version: ${text}`)
  return v
}

/**
 * A refusal: Talos's own text (`talos`: what the installer or the node would answer), or the tool's
 * when the table does not know the target (`tool`: the installer of that minor may still accept it).
 */
export type Refusal = { by: 'talos' | 'tool'; text: string }

/**
 * Whether the installer of `target` upgrades (or downgrades) a node running `host`: undefined, or
 * the refusal with the installer's exact text (`UpgradeableFrom`, talos_version.go).
 */
export function upgradeableFrom(host: Version, target: Version): Refusal | undefined {
  const row = rowOf(target)
  if (!row)
    return {
      by: 'tool',
      text: `this tool knows Talos up to ${NEWEST_KNOWN_TALOS}; the installer of ${minorOf(target)} may refuse an upgrade from ${versionText(host)} (${versionText(target)} is not in this tool's table)`,
    }
  if (compareCore(host, must(row.minHost)) < 0)
    return { by: 'talos', text: `host version ${versionText(host)} is too old to upgrade to Talos ${versionText(target)}` }
  if (compareCore(host, must(row.maxHostExclusive)) >= 0)
    return { by: 'talos', text: `host version ${versionText(host)} is too new to downgrade to Talos ${versionText(target)}` }
  return undefined
}

/**
 * Whether Talos `talos` runs Kubernetes `kubernetes`: undefined, or Talos's text (`SupportedWith`,
 * kubernetes_version.go: the same text a node answers an apply with, and upgrade-k8s prints per node).
 */
export function kubernetesSupported(kubernetes: Version, talos: Version): Refusal | undefined {
  const row = rowOf(talos)
  if (!row)
    return {
      by: 'tool',
      text: `this tool knows Talos up to ${NEWEST_KNOWN_TALOS}: which Kubernetes Talos ${versionText(talos)} runs is not in its table (Talos would say: compatibility with version ${versionText(talos)} is not supported)`,
    }
  if (compareCore(kubernetes, must(row.minKubernetes)) < 0)
    return { by: 'talos', text: `version of Kubernetes ${versionText(kubernetes)} is too old to be used with Talos ${versionText(talos)}` }
  if (compareCore(kubernetes, must(row.maxKubernetesExclusive)) >= 0)
    return { by: 'talos', text: `version of Kubernetes ${versionText(kubernetes)} is too new to be used with Talos ${versionText(talos)}` }
  return undefined
}

/**
 * The newest Kubernetes minor a talosctl's `upgrade-k8s` reaches: the paths of siderolabs/go-kubernetes
 * `kubernetes/upgrade/path.go` (`IsSupported`) as each talosctl's go.mod pins it. talosctl v1.12.x has
 * v0.2.28 (up to 1.35->1.35); v1.13.x pins v0.2.38, whose list is taken from v0.2.39 (1.35->1.36,
 * 1.36->1.36) until a run of the real talosctl v1.13.9 says otherwise (docs/day2-design.md 1.6).
 * Undefined for a talosctl this tool has not read.
 */
export function k8sPathClientLimit(talosctl: Version): string | undefined {
  if (talosctl.major !== 1) return undefined
  if (talosctl.minor === 12) return '1.35'
  if (talosctl.minor === 13) return '1.36'
  return undefined
}

/**
 * Whether `talosctl upgrade-k8s` (of `talosctl`) takes `from` to `to`: undefined, or the refusal.
 * The path is one minor at a time from 1.19 on (`x->x`, `x->x+1`); talosctl's text is
 * `unsupported upgrade path 1.33->1.35 (from "1.33.2" to "1.35.0")` (pkg/cluster/kubernetes/talos_managed.go).
 */
export function kubernetesPath(from: Version, to: Version, talosctl: Version): Refusal | undefined {
  const path = `${minorOf(from)}->${minorOf(to)}`
  const unsupported: Refusal = {
    by: 'talos',
    text: `unsupported upgrade path ${path} (from "${versionText(from)}" to "${versionText(to)}")`,
  }
  if (from.major !== 1 || to.major !== 1 || from.minor < 19 || to.minor < from.minor || to.minor > from.minor + 1) return unsupported
  const limit = k8sPathClientLimit(talosctl)
  if (!limit)
    return {
      by: 'tool',
      text: `this tool knows the Kubernetes paths of talosctl v1.12 and v1.13, not v${versionText(talosctl)}`,
    }
  if (to.minor > must(`${limit}.0`).minor)
    return {
      by: 'talos',
      text: `${unsupported.text}: talosctl v${versionText(talosctl)} upgrades Kubernetes to ${limit} at most; use talosctl ≥ v1.13`,
    }
  return undefined
}

/** The Image Factory installer kinds whose path carries a schematic ID (factory.talos.dev/<kind>/<id>:<tag>). */
const FACTORY_INSTALLER = /^(?<registry>[^/]+)\/(?<kind>[a-z-]*installer[a-z-]*)\/(?<schematic>[0-9a-f]{64})$/

/** The tag of an image reference (`registry.k8s.io/kube-apiserver:v1.35.0@sha256:…` -> `v1.35.0`). */
export function tagOf(image: string | undefined): string | undefined {
  const ref = (image ?? '').split('@')[0] ?? ''
  const at = ref.lastIndexOf(':')
  return at > ref.lastIndexOf('/') && at >= 0 ? ref.slice(at + 1) : undefined
}

/**
 * Whether an installer image is a secure-boot one (Image Factory's `installer-secureboot`,
 * `<platform>-installer-secureboot`, or an imager-built `…-secureboot` repository): only its boot loader
 * and UKI are signed, so only it installs a system a secure-boot machine still boots.
 */
export const isSecureBootInstaller = (image: string): boolean =>
  repositoryOf(image)
    .split('/')
    .some((part, i, all) => (i > 0 || all.length === 1) && part.endsWith('-secureboot'))

/** The schematic ID in an Image Factory installer reference (`factory.talos.dev/installer/<64 hex>:v1.12.11`). */
export function schematicOfImage(image: string | undefined): string | undefined {
  return /\/([0-9a-f]{64})(?=[:@]|$)/.exec(image ?? '')?.[1]
}

/** `repo:tag` or `repo@sha256:…` without its tag or digest (a registry port's colon kept). */
export function repositoryOf(image: string): string {
  const noDigest = image.replace(/@.*$/, '')
  const slash = noDigest.lastIndexOf('/')
  const colon = noDigest.lastIndexOf(':')
  return colon > slash ? noDigest.slice(0, colon) : noDigest
}

/** What the plan knows of a node for its installer image. */
export interface InstallerFacts {
  /** machine.install.image of its config, when it names one */
  installImage?: string
  /** the Image Factory schematic it runs (ExtensionStatus `schematic`'s version), when any */
  schematic?: string
  /** the system extensions it runs (not the virtual `schematic`) */
  extensions: string[]
  /** secure boot on (SecurityState) */
  secureBoot: boolean
}

/** The operator's ask: TALOS_VERSION or IMAGE, and SCHEMATIC to change the schematic. */
export interface InstallerAsk {
  talosVersion?: string
  image?: string
  schematic?: string
}

export const DEFAULT_INSTALLER = 'ghcr.io/siderolabs/installer'

/**
 * The installer image a node's upgrade sends: IMAGE as it is; otherwise the repository of its
 * machine.install.image (ghcr.io/siderolabs/installer without one) at TALOS_VERSION, an Image Factory
 * path keeping the node's running schematic (SCHEMATIC replaces it), and a plain installer swapped for
 * the factory's when the node runs a schematic; on a secure-boot node the factory's secure-boot kind.
 * Refused: an image without any schematic for a node that runs extensions (the upgrade would drop
 * them), a plain installer for a secure-boot node (it would not boot again: Talos does not check it,
 * the firmware refuses the unsigned boot loader the installer writes), and a version that is not one.
 * A refusal names the image that would do (`suggest`) when the node's schematic tells it.
 */
export function installerImage(facts: InstallerFacts, ask: InstallerAsk): { image: string } | { refused: string; suggest?: string } {
  const withV = (version: string): string => (version.startsWith('v') ? version : `v${version}`)
  const tagAsked = ask.talosVersion ? withV(ask.talosVersion) : tagOf(ask.image)
  const schematic = ask.schematic ?? facts.schematic
  const refusalOf = (image: string): { refused: string; suggest?: string } | undefined => {
    if (facts.extensions.length > 0 && !schematicOfImage(image))
      return {
        refused: `${image} carries no Image Factory schematic, but the node runs the system extensions ${facts.extensions.join(', ')}: the upgrade would drop them (use the factory installer of its schematic${facts.schematic ? ` ${facts.schematic}` : ''}, or IMAGE with one that has them)`,
      }
    if (facts.secureBoot && !isSecureBootInstaller(image)) {
      const suggest = schematic && tagAsked ? `factory.talos.dev/installer-secureboot/${schematic}:${tagAsked}` : undefined
      return {
        refused: `${image} is not a secure-boot installer, but the node boots with secure boot on (talosctl get securitystate: secureBoot true): it would not boot the upgraded system (the installer writes a boot loader its keys do not sign)${suggest ? `; the secure-boot installer of its schematic is ${suggest}` : ': give IMAGE a secure-boot installer of its schematic (factory.talos.dev/installer-secureboot/<schematic>:<version>; talosctl get extensions names the schematic)'}`,
        ...(suggest ? { suggest } : {}),
      }
    }
    return undefined
  }
  if (ask.image) return refusalOf(ask.image) ?? { image: ask.image }
  const version = ask.talosVersion ? parseVersion(ask.talosVersion) : undefined
  if (!ask.talosVersion || !version) return { refused: `TALOS_VERSION ${ask.talosVersion ?? '(unset)'} is not a version like v1.13.9` }
  const tag = withV(ask.talosVersion)
  const repository = repositoryOf(facts.installImage ?? DEFAULT_INSTALLER)
  const factory = FACTORY_INSTALLER.exec(repository)?.groups
  let image: string
  if (factory && schematic) {
    // the factory serves every kind signed too: `installer` -> `installer-secureboot`, `metal-installer` -> `metal-installer-secureboot`
    const kind = facts.secureBoot && !isSecureBootInstaller(repository) ? `${factory.kind ?? 'installer'}-secureboot` : factory.kind
    image = `${factory.registry}/${kind}/${schematic}:${tag}`
  } else if (!factory && schematic && repository === DEFAULT_INSTALLER)
    image = `factory.talos.dev/${facts.secureBoot ? 'installer-secureboot' : 'installer'}/${schematic}:${tag}`
  else image = `${repository}:${tag}`
  return refusalOf(image) ?? { image }
}
