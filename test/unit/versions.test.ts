// lib/input/versions.ts against what the Talos source says (tags v1.12.11 and v1.13.9):
// pkg/machinery/compatibility/talos_version.go `UpgradeableFrom`, kubernetes_version.go `SupportedWith`,
// talos1{10,11,12,13}/*.go (the rows), siderolabs/go-kubernetes kubernetes/upgrade/path.go (v0.2.28 in
// talosctl v1.12.11's go.mod, v0.2.39 read for v1.13.9's v0.2.38) and pkg/cluster/kubernetes/talos_managed.go.
import { describe, expect, it } from 'vitest'
import {
  installerImage,
  isSecureBootInstaller,
  k8sPathClientLimit,
  kubernetesPath,
  kubernetesSupported,
  parseVersion,
  repositoryOf,
  TALOS_COMPATIBILITY,
  upgradeableFrom,
  versionText,
  type Version,
} from '../../lib/input/versions.js'

const v = (text: string): Version => {
  const parsed = parseVersion(text)
  if (!parsed) throw new Error(`test version ${text} does not parse`)
  return parsed
}

describe('parseVersion', () => {
  it('takes vX.Y.Z with or without v, a pre-release and build metadata; prints as Go semver does (no v)', () => {
    expect(parseVersion('v1.12.11')).toEqual({ major: 1, minor: 12, patch: 11, pre: '' })
    expect(parseVersion('1.13.0-alpha.2')).toEqual({ major: 1, minor: 13, patch: 0, pre: 'alpha.2' })
    expect(parseVersion('v1.13.9+dirty')).toEqual({ major: 1, minor: 13, patch: 9, pre: '' })
    expect(versionText(v('v1.13.0-beta.1'))).toBe('1.13.0-beta.1')
  })

  it('refuses what is no version (a mistyped TALOS_VERSION or TO is exit 2 before any node is touched)', () => {
    for (const bad of ['', 'latest', 'v1.13', '1.13.x', 'v01.13.0', 'v1.13.9 x', 'vv1.13.9', '1.13.9-', 'v1.13.9;rm'])
      expect(parseVersion(bad), bad).toBeUndefined()
  })
})

describe('upgradeableFrom: the installer of the target judges the host (UpgradeableFrom)', () => {
  it('1.11 -> 1.13 is accepted: talos113 MinimumHostUpgradeVersion is 1.11.0', () => {
    expect(upgradeableFrom(v('v1.11.0'), v('v1.13.9'))).toBeUndefined()
    expect(upgradeableFrom(v('v1.11.6'), v('v1.13.9'))).toBeUndefined()
  })

  it('1.10 -> 1.13 is refused with the installer text: host version … is too old to upgrade to Talos …', () => {
    expect(upgradeableFrom(v('v1.10.7'), v('v1.13.9'))).toEqual({
      by: 'talos',
      text: 'host version 1.10.7 is too old to upgrade to Talos 1.13.9',
    })
  })

  it('1.12.11 -> 1.13.9 (the e2e path) is accepted, and so is the patch upgrade 1.12.0 -> 1.12.11', () => {
    expect(upgradeableFrom(v('v1.12.11'), v('v1.13.9'))).toBeUndefined()
    expect(upgradeableFrom(v('v1.12.0'), v('v1.12.11'))).toBeUndefined()
  })

  it('1.9 -> 1.12 is refused (talos112 MinimumHostUpgradeVersion 1.10.0), 1.10.0 -> 1.12 accepted', () => {
    expect(upgradeableFrom(v('v1.9.5'), v('v1.12.11'))?.text).toBe('host version 1.9.5 is too old to upgrade to Talos 1.12.11')
    expect(upgradeableFrom(v('v1.10.0'), v('v1.12.11'))).toBeUndefined()
  })

  it('downgrades: 1.13 -> 1.12 is accepted (talos112 MaximumHostDowngradeVersion 1.14.0 is exclusive); 1.14.0 -> 1.12 refused', () => {
    expect(upgradeableFrom(v('v1.13.9'), v('v1.12.11'))).toBeUndefined()
    expect(upgradeableFrom(v('v1.14.0'), v('v1.12.11'))).toEqual({
      by: 'talos',
      text: 'host version 1.14.0 is too new to downgrade to Talos 1.12.11',
    })
    expect(upgradeableFrom(v('v1.15.0'), v('v1.13.9'))?.text).toBe('host version 1.15.0 is too new to downgrade to Talos 1.13.9')
    expect(upgradeableFrom(v('v1.14.3'), v('v1.13.9'))).toBeUndefined()
  })

  it('compares major.minor.patch only: a 1.11.0 pre-release host counts as 1.11.0 (ordered.MakeTriple)', () => {
    expect(upgradeableFrom(v('v1.11.0-alpha.1'), v('v1.13.9'))).toBeUndefined()
    expect(upgradeableFrom(v('v1.10.99-beta.0'), v('v1.13.0-alpha.2'))?.text).toBe(
      'host version 1.10.99-beta.0 is too old to upgrade to Talos 1.13.0-alpha.2',
    )
  })

  it('a target minor the table does not know is the tool’s refusal, not a Talos text (the 1.14 installer judges itself)', () => {
    const refusal = upgradeableFrom(v('v1.13.9'), v('v1.14.0'))
    expect(refusal?.by).toBe('tool')
    expect(refusal?.text).toMatch(/^this tool knows Talos up to 1\.13; the installer of 1\.14 may refuse/)
  })

  it('the rows of the two tags: targets 1.10 to 1.13 as the talos1{10..13} packages hold them', () => {
    const row = (minor: string) => TALOS_COMPATIBILITY.find((r) => r.minor === minor)
    expect(row('1.10')).toMatchObject({
      minHost: '1.8.0',
      maxHostExclusive: '1.12.0',
      minKubernetes: '1.28.0',
      maxKubernetesExclusive: '1.33.99',
    })
    expect(row('1.11')).toMatchObject({
      minHost: '1.9.0',
      maxHostExclusive: '1.13.0',
      minKubernetes: '1.29.0',
      maxKubernetesExclusive: '1.34.99',
    })
    expect(row('1.12')).toMatchObject({
      minHost: '1.10.0',
      maxHostExclusive: '1.14.0',
      minKubernetes: '1.30.0',
      maxKubernetesExclusive: '1.35.99',
    })
    expect(row('1.13')).toMatchObject({
      minHost: '1.11.0',
      maxHostExclusive: '1.15.0',
      minKubernetes: '1.31.0',
      maxKubernetesExclusive: '1.36.99',
    })
    // the rows are in order and each minor has one
    expect(new Set(TALOS_COMPATIBILITY.map((r) => r.minor)).size).toBe(TALOS_COMPATIBILITY.length)
  })
})

describe('kubernetesSupported (SupportedWith)', () => {
  it('Talos 1.13 runs Kubernetes 1.31.0 to every 1.36 patch; 1.30 is too old, 1.37 too new', () => {
    expect(kubernetesSupported(v('v1.31.0'), v('v1.13.9'))).toBeUndefined()
    expect(kubernetesSupported(v('v1.36.4'), v('v1.13.9'))).toBeUndefined()
    expect(kubernetesSupported(v('v1.30.14'), v('v1.13.9'))).toEqual({
      by: 'talos',
      text: 'version of Kubernetes 1.30.14 is too old to be used with Talos 1.13.9',
    })
    expect(kubernetesSupported(v('v1.37.0'), v('v1.13.9'))?.text).toBe(
      'version of Kubernetes 1.37.0 is too new to be used with Talos 1.13.9',
    )
  })

  it('Talos 1.12 refuses Kubernetes 1.36 (the bound 1.35.99 is exclusive: 1.35.99 itself is refused)', () => {
    expect(kubernetesSupported(v('v1.35.0'), v('v1.12.11'))).toBeUndefined()
    expect(kubernetesSupported(v('v1.35.98'), v('v1.12.11'))).toBeUndefined()
    expect(kubernetesSupported(v('v1.35.99'), v('v1.12.11'))?.text).toBe(
      'version of Kubernetes 1.35.99 is too new to be used with Talos 1.12.11',
    )
    expect(kubernetesSupported(v('v1.36.0'), v('v1.12.11'))?.text).toBe(
      'version of Kubernetes 1.36.0 is too new to be used with Talos 1.12.11',
    )
  })

  it('a Talos minor outside the table is the tool’s refusal', () => {
    expect(kubernetesSupported(v('v1.35.0'), v('v1.14.0'))?.by).toBe('tool')
  })
})

describe('the Kubernetes path upgrade-k8s takes (go-kubernetes upgrade/path.go)', () => {
  it('the client limit: talosctl v1.12 reaches 1.35, v1.13 reaches 1.36; another talosctl is unknown', () => {
    expect(k8sPathClientLimit(v('v1.12.11'))).toBe('1.35')
    expect(k8sPathClientLimit(v('v1.13.9'))).toBe('1.36')
    expect(k8sPathClientLimit(v('v1.11.5'))).toBeUndefined()
  })

  it('one minor at a time, talosctl’s text for a jump', () => {
    expect(kubernetesPath(v('v1.34.1'), v('v1.35.0'), v('v1.12.11'))).toBeUndefined()
    expect(kubernetesPath(v('v1.35.0'), v('v1.35.2'), v('v1.12.11'))).toBeUndefined()
    expect(kubernetesPath(v('v1.33.2'), v('v1.35.0'), v('v1.13.9'))).toEqual({
      by: 'talos',
      text: 'unsupported upgrade path 1.33->1.35 (from "1.33.2" to "1.35.0")',
    })
    // a downgrade is no path either
    expect(kubernetesPath(v('v1.35.0'), v('v1.34.1'), v('v1.13.9'))?.text).toBe(
      'unsupported upgrade path 1.35->1.34 (from "1.35.0" to "1.34.1")',
    )
  })

  it('1.35 -> 1.36 needs talosctl v1.13: v1.12.11 says so by name', () => {
    expect(kubernetesPath(v('v1.35.0'), v('v1.36.0'), v('v1.13.9'))).toBeUndefined()
    const refused = kubernetesPath(v('v1.35.0'), v('v1.36.0'), v('v1.12.11'))
    expect(refused?.text).toBe(
      'unsupported upgrade path 1.35->1.36 (from "1.35.0" to "1.36.0"): talosctl v1.12.11 upgrades Kubernetes to 1.35 at most; use talosctl ≥ v1.13',
    )
  })
})

describe('installerImage', () => {
  const schematic = 'a'.repeat(64)
  const other = 'b'.repeat(64)

  it('keeps the repository of machine.install.image and the running schematic, at TALOS_VERSION', () => {
    expect(
      installerImage(
        {
          installImage: `factory.talos.dev/metal-installer/${schematic}:v1.12.11`,
          schematic,
          extensions: ['iscsi-tools'],
          secureBoot: false,
        },
        { talosVersion: 'v1.13.9' },
      ),
    ).toEqual({ image: `factory.talos.dev/metal-installer/${schematic}:v1.13.9` })
  })

  it('SCHEMATIC replaces the running schematic; a bare version gets its v', () => {
    expect(
      installerImage(
        { installImage: `factory.talos.dev/installer/${schematic}:v1.12.11`, schematic, extensions: [], secureBoot: false },
        { talosVersion: '1.13.9', schematic: other },
      ),
    ).toEqual({ image: `factory.talos.dev/installer/${other}:v1.13.9` })
  })

  it('a node on a schematic whose config names the plain installer gets the factory installer (secure boot: installer-secureboot)', () => {
    expect(installerImage({ schematic, extensions: ['qemu-guest-agent'], secureBoot: true }, { talosVersion: 'v1.13.9' })).toEqual({
      image: `factory.talos.dev/installer-secureboot/${schematic}:v1.13.9`,
    })
  })

  it('no schematic, no extensions: the plain installer, or a mirror’s repository with a port', () => {
    expect(installerImage({ extensions: [], secureBoot: false }, { talosVersion: 'v1.13.9' })).toEqual({
      image: 'ghcr.io/siderolabs/installer:v1.13.9',
    })
    expect(
      installerImage(
        { installImage: 'registry.lan:5000/siderolabs/installer:v1.12.11', extensions: [], secureBoot: false },
        { talosVersion: 'v1.13.9' },
      ),
    ).toEqual({ image: 'registry.lan:5000/siderolabs/installer:v1.13.9' })
    expect(repositoryOf('registry.lan:5000/x/installer@sha256:abcd')).toBe('registry.lan:5000/x/installer')
  })

  it('refuses an image without a schematic for a node that runs extensions (the upgrade would drop them)', () => {
    const refused = installerImage(
      { schematic, extensions: ['iscsi-tools'], secureBoot: false },
      { image: 'ghcr.io/siderolabs/installer:v1.13.9' },
    )
    expect(refused).toEqual({
      refused: expect.stringMatching(/carries no Image Factory schematic.*iscsi-tools: the upgrade would drop them/),
    })
    // IMAGE with a schematic is taken as it is
    expect(
      installerImage(
        { schematic, extensions: ['iscsi-tools'], secureBoot: false },
        { image: `factory.talos.dev/installer/${other}:v1.13.9` },
      ),
    ).toEqual({ image: `factory.talos.dev/installer/${other}:v1.13.9` })
  })

  it('a secure-boot node keeps a secure-boot installer: the factory kind gets its signed variant', () => {
    for (const kind of ['installer', 'metal-installer'])
      expect(
        installerImage(
          { installImage: `factory.talos.dev/${kind}/${schematic}:v1.12.11`, schematic, extensions: [], secureBoot: true },
          { talosVersion: 'v1.13.9' },
        ),
      ).toEqual({ image: `factory.talos.dev/${kind}-secureboot/${schematic}:v1.13.9` })
    expect(
      installerImage(
        { installImage: `factory.talos.dev/installer-secureboot/${schematic}:v1.12.11`, schematic, extensions: [], secureBoot: true },
        { talosVersion: 'v1.13.9' },
      ),
    ).toEqual({ image: `factory.talos.dev/installer-secureboot/${schematic}:v1.13.9` })
    expect(isSecureBootInstaller(`factory.talos.dev/metal-installer-secureboot/${schematic}:v1.13.9`)).toBe(true)
    expect(isSecureBootInstaller('registry.lan:5000/siderolabs/installer-secureboot@sha256:abcd')).toBe(true)
    expect(isSecureBootInstaller('my-secureboot.lan/siderolabs/installer:v1.13.9')).toBe(false)
  })

  it('refuses a plain installer for a secure-boot node, naming the signed one of its schematic when known', () => {
    expect(
      installerImage(
        { installImage: `factory.talos.dev/installer-secureboot/${schematic}:v1.12.11`, schematic, extensions: [], secureBoot: true },
        { image: `factory.talos.dev/installer/${schematic}:v1.13.9` },
      ),
    ).toEqual({
      refused: expect.stringMatching(
        /is not a secure-boot installer, but the node boots with secure boot on .*would not boot the upgraded system/,
      ),
      suggest: `factory.talos.dev/installer-secureboot/${schematic}:v1.13.9`,
    })
    // a mirror without a schematic: nothing to suggest, the refusal says where to look
    const mirror = installerImage(
      { installImage: 'registry.lan:5000/siderolabs/installer:v1.12.11', extensions: [], secureBoot: true },
      { talosVersion: 'v1.13.9' },
    )
    expect(mirror).toEqual({
      refused: expect.stringContaining('registry.lan:5000/siderolabs/installer:v1.13.9 is not a secure-boot installer'),
    })
    expect(mirror).not.toHaveProperty('suggest')
    // not secure boot: a plain installer is what it needs
    expect(installerImage({ extensions: [], secureBoot: false }, { image: 'ghcr.io/siderolabs/installer:v1.13.9' })).toEqual({
      image: 'ghcr.io/siderolabs/installer:v1.13.9',
    })
  })

  it('refuses a TALOS_VERSION that is no version', () => {
    expect(installerImage({ extensions: [], secureBoot: false }, { talosVersion: 'latest' })).toEqual({
      refused: expect.stringContaining('TALOS_VERSION latest is not a version'),
    })
  })
})
