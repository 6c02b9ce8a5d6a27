// A plain log (a pipe, CI) gets a waiting node's line when its state changes and at most every 30 s
// otherwise; a terminal, redrawn in place, gets every change.
import { describe, expect, it } from 'vitest'
import { PLAIN_REPEAT_MS, progressFilter, progressState } from '../../lib/engine/runner.js'

describe('progress lines', () => {
  it('one state whatever its elapsed times', () => {
    expect(progressState('booting for 12s')).toBe(progressState('booting for 1m5s'))
    expect(progressState('not answering for 900ms')).toBe(progressState('not answering for 2s'))
    expect(progressState('booting for 12s')).not.toBe(progressState('running for 12s'))
  })

  it('in plain output: a line per state change, and the same state again only after 30 s', () => {
    let now = 0
    const shows = progressFilter(true, () => now)
    const printed: string[] = []
    const say = (text: string): void => {
      if (shows(text)) printed.push(text)
    }
    // one poll a second for a minute, the elapsed time in every line (as verify's states are)
    for (let second = 0; second < 60; second++) {
      now = second * 1000
      say(`not answering for ${second}s`)
    }
    now = 61_000
    say('booting for 1s')
    now = 62_000
    say('booting for 2s')
    expect(printed).toEqual(['not answering for 0s', `not answering for ${PLAIN_REPEAT_MS / 1000}s`, 'booting for 1s'])
  })

  it('on a terminal: every change', () => {
    let now = 0
    const shows = progressFilter(false, () => now)
    const printed = ['booting for 1s', 'booting for 1s', 'booting for 2s'].filter((text) => {
      now += 1000
      return shows(text)
    })
    expect(printed).toEqual(['booting for 1s', 'booting for 2s'])
  })
})
