// cobra-like command tree: finding the sub-command, arg validation, usage/help texts as cobra prints them.
import { Flag, FlagSet } from './flags.js'

export class UsageError extends Error {}

export const args = {
  none: (cmd, a) => (a.length > 0 ? `unknown command ${JSON.stringify(a[0])} for ${JSON.stringify(cmd.path())}` : null),
  max: (n) => (cmd, a) => (a.length > n ? `accepts at most ${n} arg(s), received ${a.length}` : null),
  exact: (n) => (cmd, a) => (a.length !== n ? `accepts ${n} arg(s), received ${a.length}` : null),
  range: (lo, hi) => (cmd, a) => (a.length < lo || a.length > hi ? `accepts between ${lo} and ${hi} arg(s), received ${a.length}` : null),
  min: (n) => (cmd, a) => (a.length < n ? `requires at least ${n} arg(s), only received ${a.length}` : null),
}

export class Command {
  /** spec: {use, aliases, short, long, args, flags:[], persistentFlags:[], run, group, hidden, required:[]} */
  constructor(spec) {
    Object.assign(this, { aliases: [], short: '', long: '', commands: [], parent: null, hidden: false, required: [] }, spec)
    this.localFlags = (spec.flags ?? []).map((f) => new Flag(f))
    this.persistent = (spec.persistentFlags ?? []).map((f) => new Flag({ ...f, persistent: true }))
    for (const c of spec.commands ?? []) c.parent = this
  }

  get name() { return this.use.split(' ')[0] }
  path() { return this.parent ? this.parent.path() + ' ' + this.name : this.name }
  runnable() { return !!this.run }
  available() { return this.commands.filter((c) => !c.hidden) }
  root() { return this.parent ? this.parent.root() : this }

  inheritedFlags() {
    const out = []
    for (let p = this.parent; p; p = p.parent) for (const f of p.persistent) if (!out.find((o) => o.name === f.name)) out.push(f)
    return out.filter((f) => !this.persistent.find((o) => o.name === f.name) && !this.localFlags.find((o) => o.name === f.name))
  }

  ownFlags() {
    const own = [...this.localFlags, ...this.persistent]
    if (!own.find((f) => f.name === 'help')) own.push(new Flag({ name: 'help', short: 'h', type: 'bool', def: false, usage: `help for ${this.name}` }))
    return own
  }

  allFlags() { return new FlagSet([...this.ownFlags(), ...this.inheritedFlags()]) }

  findNext(name) { return this.commands.find((c) => c.name === name || c.aliases.includes(name)) }

  /** cobra's stripFlags: the non-flag words of args, skipping values of flags that take one. */
  stripFlags(a) {
    const fs = new FlagSet(this.ownFlags())
    const out = []
    for (let i = 0; i < a.length; i++) {
      const s = a[i]
      if (s === '--') break
      if (s.startsWith('--') && !s.includes('=')) {
        const f = fs.lookup(s.slice(2))
        if (!(f && f.noOpt !== undefined)) { i++; continue }
      } else if (s.startsWith('-') && !s.includes('=') && s.length === 2) {
        const f = fs.lookupShort(s[1])
        if (!(f && f.noOpt !== undefined)) { i++; continue }
      } else if (s !== '' && !s.startsWith('-')) out.push(s)
    }
    return out
  }

  /** args minus the first occurrence of x that is not a flag value (cobra's argsMinusFirstX). */
  argsMinus(a, x) {
    const fs = new FlagSet(this.ownFlags())
    for (let i = 0; i < a.length; i++) {
      const s = a[i]
      if (s === '--') break
      if (s.startsWith('-') && !s.includes('=')) {
        const f = s.startsWith('--') ? fs.lookup(s.slice(2)) : s.length === 2 ? fs.lookupShort(s[1]) : null
        if ((s.startsWith('--') || s.length === 2) && !(f && f.noOpt !== undefined)) { i++; continue }
        continue
      }
      if (s === x) return [...a.slice(0, i), ...a.slice(i + 1)]
    }
    return a
  }

  find(a) {
    let cmd = this
    for (;;) {
      const words = cmd.stripFlags(a)
      if (words.length === 0) break
      const next = cmd.findNext(words[0])
      if (!next) break
      a = cmd.argsMinus(a, words[0])
      cmd = next
    }
    let err = null
    if (!cmd.args && cmd.commands.length > 0 && !cmd.parent) {
      const words = cmd.stripFlags(a)
      if (words.length > 0) err = `unknown command ${JSON.stringify(words[0])} for ${JSON.stringify(cmd.path())}${cmd.suggest(words[0])}`
    }
    return { cmd, args: a, err }
  }

  suggest(word) {
    const lev = (s, t) => {
      s = s.toLowerCase(); t = t.toLowerCase()
      const d = Array.from({ length: s.length + 1 }, (_, i) => [i, ...Array(t.length).fill(0)])
      for (let j = 1; j <= t.length; j++) d[0][j] = j
      for (let i = 1; i <= s.length; i++) for (let j = 1; j <= t.length; j++) {
        d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (s[i - 1] === t[j - 1] ? 0 : 1))
      }
      return d[s.length][t.length]
    }
    const hits = this.available().filter((c) => lev(word, c.name) <= 2 || c.name.toLowerCase().startsWith(word.toLowerCase())).map((c) => c.name)
    return hits.length ? `\n\nDid you mean this?\n${hits.map((h) => `\t${h}\n`).join('')}` : ''
  }

  useLine() {
    let u = this.parent ? this.parent.path() + ' ' + this.use : this.use
    if (this.allFlags().flags.some((f) => !f.hidden) && !u.includes('[flags]')) u += ' [flags]'
    return u
  }

  usageString() {
    let s = 'Usage:'
    if (this.runnable()) s += `\n  ${this.useLine()}`
    const subs = this.available()
    if (subs.length) s += `\n  ${this.path()} [command]`
    if (this.aliases.length) s += `\n\nAliases:\n  ${[this.name, ...this.aliases].join(', ')}`
    if (subs.length) {
      const pad = Math.max(11, ...this.commands.map((c) => c.name.length))
      const row = (c) => `\n  ${c.name.padEnd(pad)} ${c.short}`
      if (this.groups) {
        for (const g of this.groups) {
          s += `\n\n${g.title}`
          for (const c of subs.filter((c) => c.group === g.id)) s += row(c)
        }
        const rest = subs.filter((c) => !c.group)
        if (rest.length) { s += '\n\nAdditional Commands:'; for (const c of rest) s += row(c) }
      } else {
        s += '\n\nAvailable Commands:'
        for (const c of subs) s += row(c)
      }
    }
    const local = new FlagSet(this.ownFlags()).usages().replace(/\s+$/, '')
    if (local) s += `\n\nFlags:\n${local}`
    const inherited = new FlagSet(this.inheritedFlags()).usages().replace(/\s+$/, '')
    if (inherited) s += `\n\nGlobal Flags:\n${inherited}`
    if (subs.length) s += `\n\nUse "${this.path()} [command] --help" for more information about a command.`
    return s + '\n'
  }

  helpString() {
    const head = (this.long || this.short).replace(/\s+$/, '')
    return (head ? head + '\n\n' : '') + this.usageString()
  }
}
