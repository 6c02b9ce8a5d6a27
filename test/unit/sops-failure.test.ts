// sops's failure keeps its cause (which key file is missing, which key did not match), not only the
// closing "… but none were." The text is what sops v3.10 prints (test/secrets makes the real one).
import { describe, expect, it } from 'vitest'
import { sopsFailure } from '../../lib/tools/sops.js'

const NO_KEY_FILE = `Failed to get the data key required to decrypt the SOPS file.

Group 0: FAILED
  age1utcdpk03s82lvfyhjw7rsvy6ssxajx845vdd88ac9ez0g24zrc4spqfv6k: FAILED
    - | failed to load age identities: failed to open
      | SOPS_AGE_KEY_FILE file: open /nonexistent/keys.txt: no such
      | file or directory

Recovery failed because no master key was able to decrypt the file. In
order for SOPS to recover the file, at least one key has to be successful,
but none were.
`

describe('sops failures', () => {
  it('keep the key and its reason, drop the closing paragraph', () => {
    const text = sopsFailure(NO_KEY_FILE)
    expect(text).toBe(
      'Failed to get the data key required to decrypt the SOPS file.; age1utcdpk03s82lvfyhjw7rsvy6ssxajx845vdd88ac9ez0g24zrc4spqfv6k: failed to load age identities: failed to open SOPS_AGE_KEY_FILE file: open /nonexistent/keys.txt: no such file or directory',
    )
    expect(text).not.toContain('none were')
  })

  it('a one-line error stays as it is', () => {
    expect(sopsFailure('Error unmarshalling input yaml: yaml: line 2: did not find expected key\n')).toBe(
      'Error unmarshalling input yaml: yaml: line 2: did not find expected key',
    )
  })
})
