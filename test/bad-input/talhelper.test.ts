// Issue 15 (talhelper input that cannot be read) and issue 12 items 11 and 12 (one machine under two
// spellings of its address; machine configs that contradict the inventory or are no v1alpha1
// config; install disk fields of the wrong type). Each runs the real `task -x bootstrap:<phase>`
// against a simulated cluster on 127.97.2.x and must end with exit 2, `<path>:<line>: <what> (fix: …)`
// and no call to any node.
import { beforeEach, describe, it } from 'vitest'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.97.2')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

const TALCONFIG = 'talconfig.yaml'
const CP = 'clusterconfig/e2e-cp-1.yaml'
const WORKER = 'clusterconfig/e2e-wrkr-1.yaml'

describe('talhelper input: exit 2, file, line and fix, no node touched', () => {
  it('an unset ${VAR} names the variable and its line (bootstrap:preflight)', async () => {
    const file = bed.edit(TALCONFIG, 'ipAddress: 127.97.2.22', 'ipAddress: ${WRKR2_IP}')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, '${WRKR2_IP}'),
      what: /^variable \$\{WRKR2_IP\} not set$/,
      fix: /export it or set it in talenv\.yaml/,
    })
  })

  it('an encrypted talenv.sops.yaml without sops says sops is needed (bootstrap:apply)', async () => {
    bed.edit(TALCONFIG, 'ipAddress: 127.97.2.22', 'ipAddress: ${WRKR2_IP}')
    const env = bed.write(
      'talenv.sops.yaml',
      'WRKR2_IP: ENC[AES256_GCM,data:Zml4,iv:Zml4,tag:Zml4,type:str]\nsops:\n    mac: ENC[AES256_GCM,data:Zml4,iv:Zml4,tag:Zml4,type:str]\n    version: 3.10.2\n',
    )
    const result = await bed.cluster.task('bootstrap:apply', {}, [], { SOPS: 'sops-not-installed' })
    expectBadInput(result, bed, {
      file: env,
      what: /^the env file is encrypted with SOPS and sops is needed to read it \("sops-not-installed" not found\)$/,
      fix: /install sops/,
    })
  })

  it('a filenameTmpl the tool cannot evaluate (bootstrap:verify)', async () => {
    const file = bed.edit(TALCONFIG, /(hostname: wrkr-2\n)/, '$1      filenameTmpl: "{{ .Hostname | upper }}.yaml"\n')
    const result = await bed.cluster.task('bootstrap:verify')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'filenameTmpl'),
      what: /^wrkr-2: filenameTmpl action \{\{ \.Hostname \| upper \}\} is not one this tool evaluates/,
      fix: /\.ClusterName/,
    })
  })
})

describe('the same machine under two addresses (issue 12 item 11)', () => {
  const spellings: Array<[string, string]> = [
    ['its IPv4-mapped IPv6 form', '::ffff:127.97.2.21'],
    ['IPv4-mapped, upper case hex', '::FFFF:7F61:215'],
    ['IPv4-mapped, expanded', '0:0:0:0:0:ffff:7f61:0215'],
    ['in a comma-separated list', '127.97.2.122, ::ffff:127.97.2.21'],
  ]
  it.each(spellings)('wrkr-2 at %s of wrkr-1 (bootstrap:talos)', async (_what, spelling) => {
    const file = bed.edit(TALCONFIG, 'ipAddress: 127.97.2.22', `ipAddress: "${spelling}"`)
    const result = await bed.cluster.task('bootstrap:talos')
    const written = spelling
      .split(',')
      .map((s) => s.trim())
      .find((s) => s !== '127.97.2.122') as string
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, spelling),
      what: new RegExp(
        `^duplicate address ${written.replace(/[.]/g, '\\.')} of wrkr-2 \\(also nodes\\[1\\]\\) \\(written 127\\.97\\.2\\.21 there: the same address\\)$`,
      ),
      fix: /own address/,
    })
  })

  it('one IPv6 address written compressed and expanded, upper and lower case (bootstrap:preflight)', async () => {
    bed.edit(TALCONFIG, 'ipAddress: 127.97.2.21', 'ipAddress: "::1"')
    const file = bed.edit(TALCONFIG, 'ipAddress: 127.97.2.22', 'ipAddress: "0000:0:0:0:0:0:0:0001"')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, '0000:0:0'),
      what: /^duplicate address 0000:0:0:0:0:0:0:0001 of wrkr-2 \(also nodes\[1\]\)/,
      fix: /own address/,
    })
  })

  it('a hostname differing only in case is the same name (bootstrap:apply)', async () => {
    const file = bed.edit(TALCONFIG, 'hostname: wrkr-2', 'hostname: WRKR-1')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'WRKR-1'),
      what: /^duplicate node name "WRKR-1" \(also nodes\[1\]\)$/,
      fix: /own name/,
    })
  })
})

describe('machine configs that cannot be what the inventory says (issue 12 item 12)', () => {
  it('machine.type contradicts the inventory role (bootstrap:apply)', async () => {
    const config = bed.edit(WORKER, 'type: worker', 'type: controlplane')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'type: controlplane'),
      what: /^machine\.type "controlplane" of wrkr-1 contradicts the inventory, where it is a worker$/,
      fix: /set controlPlane: in talconfig\.yaml .* regenerate/,
    })
  })

  it('a control plane whose config is a worker config (bootstrap:talos)', async () => {
    const config = bed.edit(CP, 'type: controlplane', 'type: worker')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'type: worker'),
      what: /^machine\.type "worker" of cp-1 contradicts the inventory, where it is a control plane$/,
      fix: /regenerate/,
    })
  })

  it('a config that is a YAML list (bootstrap:preflight)', async () => {
    const config = bed.write(WORKER, '- version: v1alpha1\n  machine:\n    type: worker\n')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file: config,
      line: 1,
      what: /^the machine config of wrkr-1 is a YAML list, not a Talos machine config$/,
      fix: /one v1alpha1 document/,
    })
  })

  it('a config of another kind only (bootstrap:apply)', async () => {
    const config = bed.write(WORKER, 'apiVersion: v1alpha1\nkind: VolumeConfig\nname: EPHEMERAL\nprovisioning:\n  maxSize: 20GiB\n')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file: config,
      line: 1,
      what: /^the machine config of wrkr-1 has no v1alpha1 machine config document \(only VolumeConfig\)$/,
      fix: /regenerate the machine config/,
    })
  })

  it('a document that is neither v1alpha1 nor a Talos document (bootstrap:verify)', async () => {
    const config = bed.edit(WORKER, /^version: v1alpha1$/m, 'version: v1alpha2')
    const result = await bed.cluster.task('bootstrap:verify')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'version: v1alpha2'),
      what: /^the machine config of wrkr-1 has a document that is neither a v1alpha1 machine config \(version: "v1alpha2"\)/,
      fix: /regenerate/,
    })
  })

  it('machine.install.disk that is not a string (bootstrap:apply)', async () => {
    const config = bed.edit(WORKER, 'disk: /dev/sda', 'disk: [/dev/sda]')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'disk: [/dev/sda]'),
      what: /^machine\.install\.disk of wrkr-1 must be a device path, got \["\/dev\/sda"\]$/,
      fix: /installDisk: \/dev\/<disk>/,
    })
  })

  it('machine.install.diskSelector that is not a mapping (bootstrap:preflight)', async () => {
    const config = bed.edit(WORKER, 'disk: /dev/sda', 'diskSelector: "Samsung*"')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'diskSelector'),
      what: /^machine\.install\.diskSelector of wrkr-1 must be a mapping, got "Samsung\*"$/,
      fix: /as a mapping/,
    })
  })

  it('installDisk of the wrong type in talconfig.yaml (bootstrap:apply)', async () => {
    const file = bed.edit(TALCONFIG, /(hostname: wrkr-1\n(?:.*\n){2}\s+installDisk:) \/dev\/sda/, '$1 { name: sda }')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'installDisk: { name'),
      what: /^wrkr-1: installDisk must be a device path, got \{"name":"sda"\}$/,
      fix: /installDisk: \/dev\/sda/,
    })
  })

  it('installDiskSelector of the wrong type in talconfig.yaml (bootstrap:talos)', async () => {
    const file = bed.edit(
      TALCONFIG,
      /(hostname: wrkr-2\n(?:.*\n){2}\s+)installDisk: \/dev\/sda/,
      '$1installDiskSelector: [model, "Samsung*"]',
    )
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'installDiskSelector'),
      what: /^wrkr-2: installDiskSelector must be a mapping, got \["model","Samsung\*"\]$/,
      fix: /installDiskSelector: \{ model/,
    })
  })
})
