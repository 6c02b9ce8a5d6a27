// Simulated time: runs `speed` times faster than the wall clock.
// Shape shared with sim/kube: now() -> Date, after(simSeconds, fn) -> cancel function.

export function createClock(speed = 1) {
  if (!(speed > 0)) throw new Error(`speed must be > 0, got ${speed}`)
  const realStart = Date.now()
  const timers = new Set()
  let stopped = false

  const clock = {
    speed,
    /** simulated now: starts at the real start time, then runs speed x faster */
    now: () => new Date(realStart + (Date.now() - realStart) * speed),
    /** real milliseconds for a span of simulated seconds */
    realMs: (simSeconds) => (simSeconds * 1000) / speed,
    /** simulated seconds elapsed since `since` (a Date from now()) */
    since: (since) => (clock.now().getTime() - since.getTime()) / 1000,
    after(simSeconds, fn) {
      if (stopped) return () => {}
      const t = setTimeout(
        () => {
          timers.delete(t)
          fn()
        },
        Math.max(0, clock.realMs(simSeconds)),
      )
      timers.add(t)
      return () => {
        clearTimeout(t)
        timers.delete(t)
      }
    },
    sleep: (simSeconds) => new Promise((resolve) => clock.after(simSeconds, resolve)),
    /** cancel every pending timer (simulator stop) */
    stop() {
      stopped = true
      for (const t of timers) clearTimeout(t)
      timers.clear()
    },
  }
  return clock
}
