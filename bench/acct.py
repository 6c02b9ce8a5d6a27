#!/usr/bin/env python3
"""bench/acct.py on FILE | off | report FILE [--by comm|chain] [--depth N] [--top N]
                  | compare A B [--by comm|chain] [--depth N] [--top N]

BSD process accounting (v3 records) to break a run's CPU down by command, used inside a private pid
namespace (`unshare -p -f --mount-proc`) so only that run's processes are recorded (docs/real-control-plane.md
"Step 6"). `--by chain` names each process by its command and its ancestors' (the record holds the parent
pid): `node<task<node` is a node process whose parent is go-task, whose parent is node. A record is written
when its process exits, so a parent's record may come after its child's; pids are reused (pid_max), so a
child's parent is the record of that pid alive when the child began."""
import bisect, collections, ctypes, os, struct, sys


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
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
