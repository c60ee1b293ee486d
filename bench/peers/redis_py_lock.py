"""redis-py's Lock (Debian's python3-redis) on one redis-server: the uncontended
lock+release cycle and the handoff latency from a release to the next waiter's acquisition,
measured the way dlock_bench_single and dlock_bench_handoff measure dlock.

    /usr/bin/python3 redis_py_lock.py --port P [--settings default|fast] [--cycles N] [--rounds N]

default: the documented defaults of Redis.lock() (sleep=0.1: a waiter polls every 100 ms).
fast:    sleep=0.01, a waiter polls every 10 ms, the shortest interval that is still
         reasonable (below it each waiter's polling becomes a load of its own), and
         thread_local=False (no thread-local token storage).
Last line: RESULT peer name=redis-py settings=.. cycle_us=.. cycles_per_s=..
           handoff_median_us=.. handoff_p99_us=..
"""
import argparse
import sys
import threading
import time

import redis


def quantile(sorted_samples, q):
    return sorted_samples[min(len(sorted_samples) - 1, round(q * (len(sorted_samples) - 1)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--settings", choices=["default", "fast"], default="default")
    parser.add_argument("--cycles", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    options = {"sleep": 0.01, "thread_local": False} if args.settings == "fast" else {}

    def connect():
        return redis.Redis(host="127.0.0.1", port=args.port, socket_timeout=2, socket_connect_timeout=2)

    holder, waiter = connect(), connect()

    def cycle():
        with holder.lock("peer:py:cycle", timeout=30, **options):
            pass

    for _ in range(200):
        cycle()
    started = time.perf_counter()
    for _ in range(args.cycles):
        cycle()
    cycle_us = (time.perf_counter() - started) * 1e6 / args.cycles

    samples = []
    for _ in range(args.rounds):
        held = holder.lock("peer:py:handoff", timeout=30, **options)
        held.acquire()
        acquired_at = []
        next_lock = waiter.lock("peer:py:handoff", timeout=30, blocking_timeout=5, **options)

        def wait_for_it():
            if next_lock.acquire():
                acquired_at.append(time.perf_counter())
                next_lock.release()  # on this thread: the default lock keeps its token thread-local

        thread = threading.Thread(target=wait_for_it)
        thread.start()
        time.sleep(0.003)
        released_at = time.perf_counter()
        held.release()
        thread.join(timeout=10)
        if not acquired_at:
            print("redis_py_lock.py: the waiter did not get the lock within 5 s", file=sys.stderr)
            return 1
        samples.append((acquired_at[0] - released_at) * 1e6)
    samples.sort()
    median, p99 = quantile(samples, 0.5), quantile(samples, 0.99)
    print(f"redis-py Lock ({args.settings}): cycle {cycle_us:.1f} us, handoff median {median:.0f} us, p99 {p99:.0f} us")
    print(f"RESULT peer name=redis-py settings={args.settings} cycle_us={cycle_us:.1f} "
          f"cycles_per_s={1e6 / cycle_us:.0f} handoff_median_us={median:.1f} handoff_p99_us={p99:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
