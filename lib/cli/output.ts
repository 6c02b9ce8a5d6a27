import chalk from 'chalk'
import { escapeControls } from '../core/text.ts'

/** Colour only on a terminal and never with NO_COLOR (chalk alone ignores NO_COLOR). */
const colour = process.stderr.isTTY === true && !process.env.NO_COLOR && process.env.TERM !== 'dumb'
const paint = (fn: (s: string) => string, text: string): string => (colour ? fn(text) : text)

/**
 * Tables and the summary go to stdout; errors and warnings to stderr (docs/design.md, output). Every
 * text has its control characters made visible (lib/core/text.ts): much of it came from outside.
 */
export const output = {
  /** `colour`: the text is the tool's own colouring of escaped parts (the timeline) */
  table(text: string, options: { colour?: boolean } = {}): void {
    process.stdout.write(`${escapeControls(text, options.colour === true)}\n`)
  },
  info(text: string): void {
    process.stdout.write(`${escapeControls(text)}\n`)
  },
  warn(text: string): void {
    process.stderr.write(`${paint(chalk.yellow, 'warning:')} ${escapeControls(text)}\n`)
  },
  plainError(text: string): void {
    process.stderr.write(`${escapeControls(text)}\n`)
  },
  error(text: string): void {
    process.stderr.write(`${paint(chalk.red, 'error:')} ${escapeControls(text)}\n`)
  },
  /** `--watch`: back to the top of a cleared terminal before the next table */
  clearScreen(): void {
    process.stdout.write('\u001b[H\u001b[2J')
  },
}
