// In-process API (ARCHITECTURE.md): tests and the daemon start simulators through this.
import { loadScenario } from './scenario.js'
import { Simulator } from './cluster.js'

export { loadScenario, parseScenario, ScenarioError } from './scenario.js'
export { Simulator } from './cluster.js'
export { REBOOT_FLOOR_MS } from './node.js'
export { criticalPathSeconds, upgradeCriticalPathSeconds } from './critical-path.js'

/**
 * startSimulator({scenario: object | YAML path | YAML text, dir = '.sim', speed?, log?, kube?, talosctl?})
 * kube: 'model' (sim/kube) or 'real' (sim/kube-real.js: the real control plane); default SIM_KUBE, else 'model'.
 * resolves once every node is in maintenance (its first stage).
 */
export async function startSimulator({ scenario, dir = '.sim', speed, log, kube, talosctl } = {}) {
  const s = loadScenario(scenario)
  if (speed != null) {
    if (!(Number(speed) > 0)) throw new Error(`speed must be > 0, got ${speed}`)
    s.speed = Number(speed)
  }
  const sim = new Simulator(s, { dir, log, talosctl, ...(kube ? { kube } : {}) })
  try {
    await sim.start()
  } catch (e) {
    await sim.stop()
    throw e
  }
  return sim
}
