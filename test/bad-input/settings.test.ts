// Issue "Every failure seen in the field, rehearsed", item 2: bad settings (bootstrap.yaml, environment,
// flags, task variables). Each case runs the real `task -x bootstrap:<phase>` against a simulated cluster
// on 127.70.2.x and must end with exit 2, `<path>:<line>: <what> (fix: <what to do>)` (no path when the
// input is a variable or a flag), and no call to any node.
import { beforeEach, describe, it } from 'vitest'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.70.2')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

const SETTINGS = 'bootstrap.yaml'

describe('bad settings and flags: exit 2, where, what and fix, no node touched', () => {
  it('CONCURRENCY=0 (bootstrap:apply)', async () => {
    const result = await bed.cluster.task('bootstrap:apply', { CONCURRENCY: '0' })
    expectBadInput(result, bed, { what: /concurrency must be a whole number >= 1, got "0"$/, fix: /CONCURRENCY=4/ })
  })

  it('CONCURRENCY=abc (bootstrap:preflight)', async () => {
    const result = await bed.cluster.task('bootstrap:preflight', { CONCURRENCY: 'abc' })
    expectBadInput(result, bed, { what: /concurrency must be a whole number >= 1, got "abc"$/, fix: /--concurrency 4/ })
  })

  it('an unknown flag (bootstrap:verify -- --frobnicate)', async () => {
    const result = await bed.cluster.task('bootstrap:verify', {}, ['--frobnicate'])
    expectBadInput(result, bed, { what: /^unknown or malformed flag --frobnicate$/, fix: /--help .*task bootstrap:verify/ })
  })

  it('a mistyped flag names the nearest one (bootstrap:talos -- --fail-fsat)', async () => {
    const result = await bed.cluster.task('bootstrap:talos', {}, ['--fail-fsat'])
    expectBadInput(result, bed, {
      what: /^unknown or malformed flag --fail-fsat$/,
      fix: /^did you mean --fail-fast\? run with -- --help for every flag: task bootstrap:talos/,
    })
  })

  it('a stray argument (bootstrap:etcd -- now)', async () => {
    const result = await bed.cluster.task('bootstrap:etcd', {}, ['now'])
    expectBadInput(result, bed, { what: /^unexpected argument "now"$/, fix: /flags only: task bootstrap:etcd/ })
  })

  it('DRY_RUN with a value that is not a yes or a no (bootstrap:apply DRY_RUN=ture)', async () => {
    // read as "false", this typo would apply configs for real
    const result = await bed.cluster.task('bootstrap:apply', { DRY_RUN: 'ture' })
    expectBadInput(result, bed, { what: /dry-run must be true or false, got "ture"$/, fix: /DRY_RUN=true/ })
  })

  it('a settings file with an unknown key (bootstrap:etcd)', async () => {
    const file = bed.edit(SETTINGS, 'retries: 5', 'retrys: 5')
    const result = await bed.cluster.task('bootstrap:etcd')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'retrys:'),
      what: /^unknown setting "retrys"$/,
      fix: /remove it or use one of: .*retries/,
    })
  })

  it('an unknown key in a section of bootstrap.yaml (bootstrap:wait-ready)', async () => {
    const file = bed.edit(SETTINGS, 'chart: cilium', 'chrat: cilium')
    const result = await bed.cluster.task('bootstrap:wait-ready')
    expectBadInput(result, bed, { file, line: lineOf(file, 'chrat:'), what: /^unknown setting "cni\.chrat"$/, fix: /chart/ })
  })

  it('bootstrap.yaml with a wrong type: retries: many (bootstrap:talos)', async () => {
    const file = bed.edit(SETTINGS, 'retries: 5', 'retries: many')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'retries: many'),
      what: /^retries must be a whole number >= 0, got "many"$/,
      fix: /set retries: 4 in bootstrap\.yaml/,
    })
  })

  it('bootstrap.yaml with a wrong type: concurrency is a list (bootstrap:preflight)', async () => {
    const file = bed.edit(SETTINGS, 'concurrency: 4', 'concurrency: [1, 2]')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'concurrency:'),
      what: /^concurrency must be a whole number >= 1, got \[1,2\]$/,
      fix: /concurrency: 4/,
    })
  })

  it('a negative duration in bootstrap.yaml (bootstrap:apply)', async () => {
    const file = bed.edit(SETTINGS, /retryDelay: .*/, 'retryDelay: -3s')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'retryDelay:'),
      what: /^retryDelay must be a duration, got "-3s"$/,
      fix: /retryDelay: 5s/,
    })
  })

  it('a zero duration in bootstrap.yaml (bootstrap:verify)', async () => {
    const file = bed.edit(SETTINGS, /callTimeout: .*/, 'callTimeout: 0s')
    const result = await bed.cluster.task('bootstrap:verify')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'callTimeout:'),
      what: /^callTimeout must be a duration, got "0s"$/,
      fix: /callTimeout: 5s/,
    })
  })

  it('a malformed duration flag (bootstrap:verify -- --verify-timeout 5minutes)', async () => {
    const result = await bed.cluster.task('bootstrap:verify', {}, ['--verify-timeout', '5minutes'])
    expectBadInput(result, bed, {
      what: /^flag --verify-timeout: verifyTimeout must be a duration, got "5minutes"$/,
      fix: /--verify-timeout 5s/,
    })
  })

  it('a malformed duration in the environment (bootstrap:wait-ready BOOTSTRAP_POLL_INTERVAL=fast)', async () => {
    const result = await bed.cluster.task('bootstrap:wait-ready', {}, [], { BOOTSTRAP_POLL_INTERVAL: 'fast' })
    expectBadInput(result, bed, {
      what: /^environment BOOTSTRAP_POLL_INTERVAL: pollInterval must be a duration, got "fast"$/,
      fix: /BOOTSTRAP_POLL_INTERVAL=5s/,
    })
  })

  it('a negative count flag (bootstrap:apply -- --retries=-1)', async () => {
    const result = await bed.cluster.task('bootstrap:apply', {}, ['--retries=-1'])
    expectBadInput(result, bed, { what: /^flag --retries: retries must be a whole number >= 0, got "-1"$/, fix: /--retries 4/ })
  })

  it('a YAML syntax error in bootstrap.yaml (bootstrap:all)', async () => {
    const file = bed.edit(SETTINGS, 'retries: 5', 'retries: 5\n  nested: 1')
    const result = await bed.cluster.task('bootstrap:all')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'retries: 5'),
      what: /^YAML syntax error at column 10: Nested mappings are not allowed in compact mappings$/,
      fix: /correct the YAML syntax/,
    })
  })

  it('bootstrap.yaml that is a list, not a mapping (bootstrap:talos)', async () => {
    const file = bed.write(SETTINGS, '# settings\n- concurrency: 2\n')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, { file, line: 2, what: /^the file must be a mapping$/, fix: /key: value pairs/ })
  })

  it('flux.mode with a value it does not know (bootstrap:flux)', async () => {
    const file = bed.edit(SETTINGS, 'mode: bootstrap', 'mode: gitops')
    const result = await bed.cluster.task('bootstrap:flux')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'mode: gitops'),
      what: /^flux\.mode must be bootstrap, operator or existing, got "gitops"$/,
      fix: /flux\.mode: bootstrap/,
    })
  })
})
