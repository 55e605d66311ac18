//! How many more renewal threads the operating system lets this process start.
//!
//! Each held auto-renewed lock has a thread of its own, and every thread costs a task (a pid, out
//! of `kernel.pid_max` and `kernel.threads-max` for the whole machine, and of the cgroup's
//! `pids.max`) and memory mappings of this process (its stack and the stack's guard page, and in
//! a Rust program also the signal stack the standard library gives every thread, with its guard
//! page: up to four, out of `vm.max_map_count`). Past those limits a thread cannot be started,
//! or in a Rust program the standard library aborts the process when it cannot map a new
//! thread's signal stack. So an acquire that could need a thread beyond them is refused with
//! `LimitReached` before it touches Redis, with a margin left for the rest of the process and of
//! the machine.
//!
//! The figures come from `/proc` and `/sys/fs/cgroup`; reading them costs a few system calls
//! (and a walk of this process's mappings), so the renewer reads them only when the count of
//! renewed locks nears the last answer, and at most every [`RECHECK_EVERY`].

use std::fs;
use std::time::Duration;

/// Mappings one thread may add: stack, stack guard, signal stack, signal stack guard.
pub(super) const MAPS_PER_THREAD: u64 = 4;
/// Below this many renewed locks no limit is read: no machine is that close to its limits.
pub(super) const CHECK_FROM: usize = 512;
/// How long a reading of the limits serves before it is read again.
pub(super) const RECHECK_EVERY: Duration = Duration::from_millis(500);

/// The limits and what is used of them, as read from the system. `None`: unknown or unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Figures {
    /// `vm.max_map_count` and this process's mappings now.
    pub max_map_count: Option<u64>,
    pub maps: Option<u64>,
    /// `kernel.pid_max`, `kernel.threads-max` and the tasks of the whole machine now.
    pub pid_max: Option<u64>,
    pub threads_max: Option<u64>,
    pub tasks: Option<u64>,
    /// The cgroup's `pids.max` and `pids.current`.
    pub cgroup_pids_max: Option<u64>,
    pub cgroup_pids: Option<u64>,
    /// `RLIMIT_NPROC` (soft), counted against every task of the machine (an upper bound of this
    /// user's).
    pub nproc: Option<u64>,
}

/// How many more threads may start, and the limit that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Budget {
    pub threads: u64,
    /// Names the limit and its figures, for the refusal's message.
    pub bound: String,
}

/// What is kept free of a limit for everything else: a sixteenth of it, and at least `floor`.
fn margin(limit: u64, floor: u64) -> u64 {
    (limit / 16).max(floor)
}

/// The number of threads that may still start under the tightest limit.
pub(super) fn budget(f: &Figures) -> Budget {
    let mut best = Budget {
        threads: u64::MAX,
        bound: "no operating-system limit is known".into(),
    };
    let mut consider = |threads: u64, bound: String| {
        if threads < best.threads {
            best = Budget { threads, bound };
        }
    };
    if let (Some(max), Some(maps)) = (f.max_map_count, f.maps) {
        let room = max.saturating_sub(margin(max, 1024)).saturating_sub(maps);
        consider(
            room / MAPS_PER_THREAD,
            format!(
                "vm.max_map_count is {max} and this process has {maps} memory mappings; each \
                 renewal thread takes up to {MAPS_PER_THREAD}"
            ),
        );
    }
    let tasks = f.tasks.unwrap_or(0);
    for (limit, name) in [
        (f.pid_max, "kernel.pid_max"),
        (f.threads_max, "kernel.threads-max"),
        (f.nproc, "the process limit (RLIMIT_NPROC)"),
    ] {
        if let Some(limit) = limit {
            let room = limit
                .saturating_sub(margin(limit, 1024))
                .saturating_sub(tasks);
            consider(
                room,
                format!(
                    "{name} is {limit} and the machine runs {tasks} tasks; each renewal thread \
                     is one"
                ),
            );
        }
    }
    if let Some(max) = f.cgroup_pids_max {
        let used = f.cgroup_pids.unwrap_or(0);
        let room = max.saturating_sub(margin(max, 64)).saturating_sub(used);
        consider(
            room,
            format!(
                "the cgroup's pids.max is {max} and it has {used} tasks; each renewal thread is one"
            ),
        );
    }
    best
}

/// Reads the figures of this process and machine.
pub(super) fn read() -> Figures {
    let num = |path: &str| -> Option<u64> { fs::read_to_string(path).ok()?.trim().parse().ok() };
    let (cgroup_pids_max, cgroup_pids) = cgroup_pids();
    Figures {
        max_map_count: num("/proc/sys/vm/max_map_count"),
        maps: fs::read("/proc/self/maps")
            .ok()
            .map(|m| m.iter().filter(|&&b| b == b'\n').count() as u64),
        pid_max: num("/proc/sys/kernel/pid_max"),
        threads_max: num("/proc/sys/kernel/threads-max"),
        // The fourth field of /proc/loadavg is "running/total" scheduling entities.
        tasks: fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok()),
        cgroup_pids_max,
        cgroup_pids,
        nproc: fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| nproc_soft(&l)),
    }
}

/// The soft "Max processes" of `/proc/self/limits` (None when unlimited).
fn nproc_soft(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max processes"))?;
    line["Max processes".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `pids.max` and `pids.current` of this process's cgroup (v2, or v1's pids controller).
fn cgroup_pids() -> (Option<u64>, Option<u64>) {
    let Ok(groups) = fs::read_to_string("/proc/self/cgroup") else {
        return (None, None);
    };
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let dir = if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}")
        } else if controllers.split(',').any(|c| c == "pids") {
            format!("/sys/fs/cgroup/pids{path}")
        } else {
            continue;
        };
        let read = |f: &str| fs::read_to_string(format!("{dir}/{f}")).ok();
        let max = read("pids.max").and_then(|m| m.trim().parse().ok());
        if max.is_some() {
            let current = read("pids.current").and_then(|c| c.trim().parse().ok());
            return (max, current);
        }
    }
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_machine() -> Figures {
        Figures {
            max_map_count: Some(65_530),
            maps: Some(130),
            pid_max: Some(32_768),
            threads_max: Some(192_729),
            tasks: Some(600),
            cgroup_pids_max: None,
            cgroup_pids: None,
            nproc: Some(96_364),
        }
    }

    #[test]
    fn mappings_bound_a_rust_process_here() {
        let b = budget(&this_machine());
        // (65530 - 4095 - 130) / 4
        assert_eq!(b.threads, 15_326);
        assert!(b.bound.contains("vm.max_map_count"), "{}", b.bound);
    }

    #[test]
    fn pids_bound_when_mappings_allow_more() {
        let f = Figures {
            max_map_count: Some(262_144),
            ..this_machine()
        };
        let b = budget(&f);
        // 32768 - 2048 - 600
        assert_eq!(b.threads, 30_120);
        assert!(b.bound.contains("kernel.pid_max"), "{}", b.bound);
    }

    #[test]
    fn a_cgroup_limit_is_honoured() {
        let f = Figures {
            cgroup_pids_max: Some(1000),
            cgroup_pids: Some(200),
            ..this_machine()
        };
        let b = budget(&f);
        assert_eq!(b.threads, 1000 - 64 - 200);
        assert!(b.bound.contains("pids.max"), "{}", b.bound);
    }

    #[test]
    fn exhausted_limits_leave_nothing_and_unknown_ones_nothing_to_say() {
        let f = Figures {
            maps: Some(65_000),
            ..this_machine()
        };
        assert_eq!(budget(&f).threads, 0);
        assert_eq!(budget(&Figures::default()).threads, u64::MAX);
    }

    #[test]
    fn nproc_is_read_from_the_limits_file() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             96364                96364                processes \n";
        assert_eq!(nproc_soft(limits), Some(96_364));
        let unlimited =
            "Max processes             unlimited            unlimited            processes \n";
        assert_eq!(nproc_soft(unlimited), None);
    }

    #[test]
    fn this_machine_can_be_read() {
        let f = read();
        assert!(f.max_map_count.is_some() && f.maps.is_some() && f.tasks.is_some());
    }
}
