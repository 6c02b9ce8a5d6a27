// What a simulated CLI process (flux) reads: its environment and working directory, in one place so
// the Kubernetes client (lib-kubeclient.js) resolves KUBECONFIG and file arguments as the caller meant.
import os from 'node:os'
import path from 'node:path'

/** the process's environment and working directory */
export const io = () => ({ env: process.env, cwd: process.cwd() })

/** A file argument as the caller meant it: relative to the caller's working directory. */
export const local = (p) => path.resolve(io().cwd, p)

/** The caller's home directory ($HOME, as Go's os.UserHomeDir reads it). */
export const home = () => io().env.HOME || os.homedir()
