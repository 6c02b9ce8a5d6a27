import chalk from 'chalk'

/** Colour only on a terminal and never with NO_COLOR (chalk alone ignores NO_COLOR). */
const colour = process.stderr.isTTY === true && !process.env.NO_COLOR && process.env.TERM !== 'dumb'
const paint = (fn: (s: string) => string, text: string): string => (colour ? fn(text) : text)

/** Tables and the summary go to stdout; errors and warnings to stderr (docs/design.md, output). */
export const output = {
  table(text: string): void {
    process.stdout.write(`${text}\n`)
  },
  info(text: string): void {
    process.stdout.write(`${text}\n`)
  },
  warn(text: string): void {
    process.stderr.write(`${paint(chalk.yellow, 'warning:')} ${text}\n`)
  },
  plainError(text: string): void {
    process.stderr.write(`${text}\n`)
  },
  error(text: string): void {
    process.stderr.write(`${paint(chalk.red, 'error:')} ${text}\n`)
  },
}
