//! Ended connections torn down off the async threads.
//!
//! Clients leave in bursts (ten thousand connections closed at once, by an
//! attacker or by a restarted fleet), and tearing one connection down —
//! closing its socket and taking it out of epoll, freeing its buffers, its
//! watch and what the watch had queued — costs more than answering a
//! request. On the async threads the whole burst queues ahead of every open
//! connection's next request: a good client's LIST waited tens of
//! milliseconds behind it. So what an ended connection holds is handed to
//! one thread of its own, at a lower priority than the async threads, to
//! drop; the async threads only hand it over.
//!
//! The hand-over is bounded: beyond [`BACKLOG`] connections waiting, one is
//! dropped where it ended. A reaper that falls behind (the machine busy for
//! long) therefore never keeps more than that many sockets open, and the
//! process's descriptors, watch slots and memory come back as before. The
//! bound is a count beside an unbounded channel, not a bounded channel:
//! std's bounded one makes all its slots at once (16,384 of them, 384 KiB
//! resident in every process that ever closed a connection), the unbounded
//! one a block of 31 at a time as they fill, and frees each once read.
//!
//! Written here: `defer-drop` and `dropout` queue without a bound and drop
//! at the caller's priority.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    mpsc::{channel, SendError, Sender},
    Arc, LazyLock,
};

/// Connections waiting to be dropped before the next is dropped in place.
pub const BACKLOG: usize = 16_384;

/// The reaper's nice value (the async threads run at the process's, 0 by
/// default): it gets the cores the serving threads leave, and about a tenth
/// of one when they leave none.
const NICE: i32 = 10;

type Held = Box<dyn Send>;

/// A thread that drops what it is handed, at most `backlog` behind.
struct Reaper {
    /// `None` when the thread could not be started: everything is dropped
    /// in place, as without a reaper.
    tx: Option<Sender<Held>>,
    /// Handed over and not yet taken by the thread.
    waiting: Arc<AtomicUsize>,
    backlog: usize,
}

impl Reaper {
    fn start(backlog: usize) -> Self {
        let (tx, rx) = channel::<Held>();
        let waiting = Arc::new(AtomicUsize::new(0));
        let taken = Arc::clone(&waiting);
        let started = std::thread::Builder::new()
            .name("sitegrid-reap".into())
            .spawn(move || {
                // Best effort: at the same priority it still takes the work
                // off the async threads.
                let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE);
                for held in rx {
                    taken.fetch_sub(1, Ordering::Relaxed);
                    drop(held);
                }
            });
        Reaper {
            tx: started.ok().map(|_| tx),
            waiting,
            backlog,
        }
    }

    fn reap<T: Send + 'static>(&self, held: T) {
        let Some(tx) = &self.tx else {
            drop(held);
            return;
        };
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.backlog {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            drop(held);
            return;
        }
        if let Err(SendError(held)) = tx.send(Box::new(held)) {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            drop(held);
        }
    }
}

static REAPER: LazyLock<Reaper> = LazyLock::new(|| Reaper::start(BACKLOG));

/// Drops `held` (an ended connection and everything it owned) on the
/// reaper's thread, or here when the reaper is [`BACKLOG`] behind.
pub fn reap<T: Send + 'static>(held: T) {
    REAPER.reap(held);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Says on which thread it was dropped.
    struct Tell(mpsc::Sender<Option<String>>);

    impl Drop for Tell {
        fn drop(&mut self) {
            let _ = self
                .0
                .send(std::thread::current().name().map(str::to_owned));
        }
    }

    #[test]
    fn what_a_connection_held_is_dropped_on_the_reaper_thread() {
        let (tx, rx) = mpsc::channel();
        reap(Tell(tx));
        let thread = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("dropped at all");
        assert_eq!(thread.as_deref(), Some("sitegrid-reap"));
    }

    /// Says it is being dropped, then blocks its dropper until told to go.
    struct Stall {
        dropping: mpsc::Sender<()>,
        go: mpsc::Receiver<()>,
    }

    impl Drop for Stall {
        fn drop(&mut self) {
            let _ = self.dropping.send(());
            let _ = self.go.recv();
        }
    }

    #[test]
    fn a_reaper_that_is_behind_holds_no_more_than_its_backlog() {
        let reaper = Reaper::start(1);
        let (go, stalled) = mpsc::channel();
        let (dropping, stuck) = mpsc::channel();
        let (told, dropped) = mpsc::channel();
        // The reaper's thread stuck on the first; the second waits in its queue.
        reaper.reap(Stall {
            dropping,
            go: stalled,
        });
        stuck
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the reaper took the first");
        reaper.reap(Tell(told.clone()));
        // The third finds the queue full: dropped here, at once.
        reaper.reap(Tell(told));
        assert_eq!(
            dropped.try_recv().ok().flatten(),
            std::thread::current().name().map(str::to_owned),
            "dropped in place"
        );
        go.send(()).expect("the reaper waits");
        let later = dropped
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the queued one dropped once the reaper is free");
        assert_eq!(later.as_deref(), Some("sitegrid-reap"));
        // Its place is free again: the next goes to the reaper too.
        let (told, dropped) = mpsc::channel();
        reaper.reap(Tell(told));
        let next = dropped
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("dropped at all");
        assert_eq!(next.as_deref(), Some("sitegrid-reap"));
    }
}
