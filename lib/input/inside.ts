// Input files stay inside the cluster directory: a path that leaves it (`../`, an absolute path) or
// a symlink that points out of it is refused before the file is read, so that no file of the
// operator's elsewhere (a key, a kubeconfig) is ever parsed and quoted in an error.
import { realpathSync } from 'node:fs'
import { relative, resolve, sep } from 'node:path'
import { InputError } from '../core/errors.ts'

function real(path: string): string | undefined {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}

/** undefined when `path` (resolved through every link) lies in `clusterDir`, or does not exist (reported where it is read). */
export function outsideClusterDir(clusterDir: string, path: string, what: string, fix: string): InputError | undefined {
  const dir = real(clusterDir) ?? resolve(clusterDir)
  const target = real(path)
  if (target === undefined) return undefined
  if (target === dir || target.startsWith(dir.endsWith(sep) ? dir : dir + sep)) return undefined
  const link = target !== resolve(path) ? ` (a link to ${target})` : ''
  return new InputError(`${what} is outside the cluster directory ${dir}${link}: inputs are read from the cluster directory only`, {
    file: path,
    fix: `${fix} (a path under ${relative(process.cwd(), dir) || dir}, no link out of it)`,
  })
}
