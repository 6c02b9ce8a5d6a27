#!/usr/bin/env python3
"""bench/acct.py on FILE | off | report FILE [--by comm|chain] [--depth N] [--top N]
                  | compare A B [--by comm|chain] [--depth N] [--top N]
                  | files FILE VITEST_LOG [FILE2 VITEST_LOG2]

BSD process accounting (v3 records) to break a run's CPU down by command, used inside a private pid
namespace (`unshare -p -f --mount-proc`) so only that run's processes are recorded (docs/real-control-plane.md
"Step 6"). `--by chain` names each process by its command and its ancestors' (the record holds the parent
pid): `node<task<node` is a node process whose parent is go-task, whose parent is node. A record is written
when its process exits, so a parent's record may come after its child's; pids are reused (pid_max), so a
child's parent is the record of that pid alive when the child began.
`files`: vitest runs each test file in a worker process of its own (a child of vitest's main process),
and every process a file starts descends from its worker, so each worker's subtree is one file's CPU;
a worker is matched to the file whose duration in vitest's log is nearest its lifetime (a heuristic:
files of about the same duration may swap, the totals over all matched files do not). With two runs,
the files both logs list are compared by command."""
import bisect, collections, ctypes, os, re, struct, sys


def comp(c):
    return (c & 0x1FFF) << (3 * ((c >> 13) & 7))


def read(path):
    data = open(path, 'rb').read()
    hz = os.sysconf('SC_CLK_TCK')
    recs = []
    for i in range(0, len(data) - 63, 64):
        r = data[i : i + 64]
        flag, ver, tty, exitc, uid, gid, pid, ppid, btime, etime, ut, st = struct.unpack('<BBHIIIIIIfHH', r[:36])
        comm = r[48:64].split(b'\0')[0].decode(errors='replace')
        # node names its main thread: the command is node
        if comm.startswith('node-'):
            comm = 'node'
        recs.append(dict(pid=pid, ppid=ppid, btime=btime, etime=etime / hz, cpu=(comp(ut) + comp(st)) / hz, comm=comm))
    return recs


def chains(recs, depth):
    by_pid = collections.defaultdict(list)
    for r in recs:
        by_pid[r['pid']].append(r)
    for rs in by_pid.values():
        rs.sort(key=lambda r: (r['btime'], -r['etime']))

    def parent(r):
        rs = by_pid.get(r['ppid'])
        if not rs:
            return None
        # the latest record of that pid started no later than the child (btime has 1 s resolution)
        i = bisect.bisect_right([x['btime'] for x in rs], r['btime']) - 1
        return rs[i] if i >= 0 else None

    out = []
    for r in recs:
        names, p, seen = [r['comm']], r, 0
        while len(names) < depth:
            p = parent(p)
            if p is None or p is r or seen > depth:
                break
            names.append(p['comm'])
            seen += 1
        out.append('<'.join(names))
    return out


def table(recs, by, depth):
    keys = chains(recs, depth) if by == 'chain' else [r['comm'] for r in recs]
    cpu, n = collections.Counter(), collections.Counter()
    for k, r in zip(keys, recs):
        cpu[k] += r['cpu']
        n[k] += 1
    return cpu, n


def _parent_finder(recs):
    by_pid = collections.defaultdict(list)
    for r in recs:
        by_pid[r['pid']].append(r)
    starts = {}
    for pid, rs in by_pid.items():
        rs.sort(key=lambda r: r['btime'])
        starts[pid] = [x['btime'] for x in rs]

    def parent(r):
        rs = by_pid.get(r['ppid'])
        if not rs:
            return None
        i = bisect.bisect_right(starts[r['ppid']], r['btime']) - 1
        return rs[i] if i >= 0 else None

    return parent


def per_worker(recs):
    """{worker: (lifetime s, Counter of CPU-s by command)}: node(worker) its own, node(product) the product under go-task"""
    parent = _parent_finder(recs)
    # vitest's main process: the parent most long-lived node processes share (alive or not, its pid is in their records)
    main = collections.Counter(r['ppid'] for r in recs if r['comm'] == 'node' and r['etime'] > 5).most_common(1)[0][0]
    out = {}
    for r in recs:
        p, hops = r, 0
        while p is not None and not (p['comm'] == 'node' and p['ppid'] == main) and hops < 12:
            p, hops = parent(p), hops + 1
        if p is None or hops >= 12:
            continue
        key = (p['pid'], p['btime'])
        c = r['comm']
        if c == 'node':
            c = 'node(worker)' if r is p else 'node(product)' if (parent(r) or {}).get('comm') == 'task' else 'node(other)'
        out.setdefault(key, [p['etime'], collections.Counter()])[1][c] += r['cpu']
    return out


def vitest_files(log):
    out = {}
    for line in open(log, errors='replace'):
        m = re.match(r'^ (?:✓|×|❯) (test/\S+) \((\d+) tests?.*?\) (\d+)ms', re.sub(r'\x1b\[[0-9;]*m', '', line))
        if m:
            out[m.group(1)] = int(m.group(3)) / 1000
    return out


def files(acct_file, log):
    workers, durations = per_worker(read(acct_file)), vitest_files(log)
    free, out = set(workers), {}
    for f, d in sorted(durations.items(), key=lambda x: -x[1]):
        best = min(free, key=lambda k: abs(workers[k][0] - d), default=None)
        if best is None:
            break
        free.discard(best)
        out[f] = workers[best][1]
    return out


def opts(args):
    by, depth, top = 'comm', 3, 40
    for i, a in enumerate(args):
        if a == '--by':
            by = args[i + 1]
        elif a == '--depth':
            depth = int(args[i + 1])
        elif a == '--top':
            top = int(args[i + 1])
    return by, depth, top


def main():
    cmd = sys.argv[1]
    if cmd == 'on':
        libc = ctypes.CDLL(None, use_errno=True)
        open(sys.argv[2], 'a').close()
        if libc.acct(sys.argv[2].encode()) != 0:
            sys.exit('acct: ' + os.strerror(ctypes.get_errno()))
    elif cmd == 'off':
        ctypes.CDLL(None).acct(None)
    elif cmd == 'report':
        by, depth, top = opts(sys.argv[3:])
        recs = read(sys.argv[2])
        cpu, n = table(recs, by, depth)
        tot = sum(cpu.values())
        print(f'total CPU-s {tot:.0f} over {sum(n.values())} processes')
        for k, c in cpu.most_common(top):
            print(f'{c:9.1f} s {100*c/tot:5.1f}%  {n[k]:7d} procs  {c/n[k]*1000:8.0f} ms/proc  {k}')
    elif cmd == 'compare':
        by, depth, top = opts(sys.argv[4:])
        (ca, na), (cb, nb) = (table(read(f), by, depth) for f in sys.argv[2:4])
        print(f'total CPU-s {sum(ca.values()):.0f} -> {sum(cb.values()):.0f}')
        print(f'{"A CPU-s":>9} {"B CPU-s":>9} {"B-A":>8}  {"A procs":>8} {"B procs":>8}  {"A ms/p":>7} {"B ms/p":>7}  command')
        keys = sorted(set(ca) | set(cb), key=lambda k: -abs(cb[k] - ca[k]))
        for k in keys[:top]:
            pa = ca[k] / na[k] * 1000 if na[k] else 0
            pb = cb[k] / nb[k] * 1000 if nb[k] else 0
            print(f'{ca[k]:9.1f} {cb[k]:9.1f} {cb[k]-ca[k]:+8.1f}  {na[k]:8d} {nb[k]:8d}  {pa:7.0f} {pb:7.0f}  {k}')
    elif cmd == 'files':
        runs = [files(sys.argv[i], sys.argv[i + 1]) for i in range(2, len(sys.argv) - 1, 2)]
        common = [f for f in runs[0] if all(f in r for r in runs)]
        print(f'{len(common)} files in every run')
        totals = [collections.Counter() for _ in runs]
        for f in common:
            for t, r in zip(totals, runs):
                t.update(r[f])
        print('  '.join(f'{sum(t.values()):9.1f}' for t in totals), ' all CPU-s')
        for k in sorted(set().union(*totals), key=lambda k: -(totals[-1][k] - totals[0][k])):
            if max(t[k] for t in totals) >= 0.05:
                print('  '.join(f'{t[k]:9.1f}' for t in totals), f' {k}')
        for f in sorted(common, key=lambda f: -sum(runs[-1][f].values()))[:20]:
            print('  '.join(f'{sum(r[f].values()):9.1f}' for r in runs), f' {f}')
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
