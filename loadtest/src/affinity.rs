//! Pinning to CPUs, to measure a process "on one core" while the load
//! generator and the watchers run on the others (Linux `sched_setaffinity`).

use std::io;

use rustix::{
    process::Pid,
    thread::{sched_getaffinity, sched_setaffinity, CpuSet},
};

/// The CPUs this process may run on.
fn allowed() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|c| set.is_set(*c)).collect())
}

fn set_of(cpus: &[usize]) -> CpuSet {
    let mut set = CpuSet::new();
    for c in cpus {
        set.set(*c);
    }
    set
}

/// Moves every thread of this process off `cpu` (threads started later
/// inherit the mask) and returns the CPUs it keeps. An error if `cpu` is not
/// one this process may use, or is the only one.
pub fn leave_cpu(cpu: usize) -> io::Result<Vec<usize>> {
    let mine = allowed()?;
    if !mine.contains(&cpu) || mine.len() < 2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} cannot be given to the proxy: this process may use CPUs {mine:?}"),
        ));
    }
    let others: Vec<usize> = mine.into_iter().filter(|c| *c != cpu).collect();
    move_threads("self", &set_of(&others))?;
    Ok(others)
}

/// A CPU to give a process alone for a while (the highest this process may
/// use), if this process may use at least two.
pub fn spare_cpu() -> io::Result<Option<usize>> {
    let mine = allowed()?;
    Ok(if mine.len() < 2 {
        None
    } else {
        mine.last().copied()
    })
}

/// This process off one CPU until dropped: then every thread of it may use
/// every CPU it could before.
#[derive(Debug)]
pub struct CpuLeft {
    before: Vec<usize>,
    /// The CPUs this process kept meanwhile.
    pub others: Vec<usize>,
}

/// [`leave_cpu`] until the returned guard is dropped.
pub fn leave_cpu_for_now(cpu: usize) -> io::Result<CpuLeft> {
    let before = allowed()?;
    let others = leave_cpu(cpu)?;
    Ok(CpuLeft { before, others })
}

impl Drop for CpuLeft {
    fn drop(&mut self) {
        // Best effort: a thread that cannot be moved back keeps the smaller
        // set, which only makes the rest of a run slower.
        let _ = move_threads("self", &set_of(&self.before));
    }
}

/// Runs process `pid` on `cpu` alone: every thread it has, and (as they
/// inherit the mask of the thread that starts them) every thread it starts.
/// Called right after the spawn; passes repeat until one finds every thread
/// pinned already, so a thread started during a pass is caught by the next.
pub fn pin_process(pid: u32, cpu: usize) -> io::Result<()> {
    let set = set_of(&[cpu]);
    for _ in 0..100 {
        if move_threads(&pid.to_string(), &set)? == 0 {
            return Ok(());
        }
    }
    Err(io::Error::other(format!(
        "process {pid} kept starting threads on other CPUs"
    )))
}

/// Gives every thread of `/proc/<process>` the CPUs of `set`; returns how
/// many were not on them already (a thread that ends meanwhile is skipped).
fn move_threads(process: &str, set: &CpuSet) -> io::Result<usize> {
    let mut moved = 0;
    for entry in std::fs::read_dir(format!("/proc/{process}/task"))? {
        let tid = entry?.file_name().to_string_lossy().parse::<i32>().ok();
        let Some(tid) = tid.and_then(Pid::from_raw) else {
            continue;
        };
        let result = match sched_getaffinity(Some(tid)) {
            Ok(now) if now == *set => continue,
            Ok(_) => sched_setaffinity(Some(tid), set),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => moved += 1,
            Err(rustix::io::Errno::SRCH) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_process_runs_on_its_cpu_alone() {
        let Some(&cpu) = allowed().unwrap().last() else {
            return;
        };
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        pin_process(child.id(), cpu).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim();
        assert_eq!(list, cpu.to_string());
    }

    #[test]
    fn a_cpu_left_for_now_is_used_again_afterwards() {
        let before = allowed().unwrap();
        let Some(cpu) = spare_cpu().unwrap() else {
            assert!(before.len() < 2, "a spare CPU whenever there are two");
            return;
        };
        assert!(before.contains(&cpu));
        {
            let left = leave_cpu_for_now(cpu).unwrap();
            let now = allowed().unwrap();
            assert!(!now.contains(&cpu), "off {cpu} meanwhile: {now:?}");
            assert_eq!(now, left.others);
            // A thread started meanwhile inherits the smaller set.
            let inherited = std::thread::spawn(allowed).join().unwrap().unwrap();
            assert!(!inherited.contains(&cpu));
        }
        assert_eq!(allowed().unwrap(), before, "every CPU again once dropped");
    }

    #[test]
    fn the_only_cpu_cannot_be_given_away() {
        let mine = allowed().unwrap();
        let missing = CpuSet::MAX_CPU - 1;
        assert!(!mine.contains(&missing));
        assert!(
            leave_cpu(missing).is_err(),
            "a CPU this process may not use"
        );
    }
}
