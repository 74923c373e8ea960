//! The one way this crate waits: a bounded poll ([`Wait::until`]: look, and look again every so
//! often until the look is done or the time is up) and a bounded [`retry`] of one call (try again,
//! after a backoff, while its error is worth another try). Every wait and every retry of the crate
//! goes through these two, so deadlines and backoff are decided here and tested once; the callers
//! say what a look is, what is worth another try, and what a timeout tells the user. The clock is
//! tokio's, so the tests below run on a paused one and take no real time.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

/// How long to sleep after each failed try: `first` after the first, then twice the previous
/// sleep, never more than `cap` (a `first` above `cap` is slept once as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
}

impl Backoff {
    /// No sleep: the next try follows at once (a write refused for a moved resourceVersion reads
    /// the object again first, so waiting gains nothing).
    pub const NONE: Backoff = Backoff::fixed(Duration::ZERO);

    /// The same sleep after every try.
    pub const fn fixed(every: Duration) -> Backoff {
        Backoff {
            first: every,
            cap: every,
        }
    }

    /// `first`, doubling after each try up to `cap`.
    pub const fn doubling(first: Duration, cap: Duration) -> Backoff {
        Backoff { first, cap }
    }

    /// The sleep after failed try `n` (1: the first try).
    pub fn after(&self, n: u32) -> Duration {
        let mut sleep = self.first;
        for _ in 1..n {
            if sleep >= self.cap {
                return self.cap;
            }
            sleep = sleep.saturating_mul(2).min(self.cap);
        }
        sleep
    }
}

/// A bounded retry: at most `tries` tries, [`Backoff`] apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Tries in all, the first included (1: never retried).
    pub tries: u32,
    /// The sleep between two tries.
    pub backoff: Backoff,
}

impl Retry {
    /// One try, never retried.
    pub const ONCE: Retry = Retry {
        tries: 1,
        backoff: Backoff::NONE,
    };
}

/// Every API call of the crate ([`crate::client::retry`]) on a transient error (throttling, server
/// errors, connection trouble): 6 tries, sleeping 100, 200, 400, 800 and 1,600 ms between them
/// (doubling; the 3.2 s cap is never reached within 6 tries).
pub const API_CALL: Retry = Retry {
    tries: 6,
    backoff: Backoff::doubling(Duration::from_millis(100), Duration::from_millis(3200)),
};

/// A write of a child that admission may refuse for a moment after its parent was written
/// (Volcano's webhook reads queues through an informer cache), or the delete of a parent whose
/// just-deleted children it still sees (apply's waves and prune): 10 tries, 300 ms apart.
pub const HIERARCHY: Retry = Retry {
    tries: 10,
    backoff: Backoff::fixed(Duration::from_millis(300)),
};

/// A read-modify-write guarded by the resourceVersion just read (a node's taints, a delete of an
/// object still as planned): refused with a conflict when the object moved in between, it is read
/// again at once, 5 tries in all.
pub const CONFLICT: Retry = Retry {
    tries: 5,
    backoff: Backoff::NONE,
};

/// Runs `op` until it succeeds, fails with an error `retryable` refuses, or `policy.tries` tries
/// have failed; then returns what the last try returned.
pub async fn retry<T, E, F, Fut>(
    policy: Retry,
    retryable: impl Fn(&E) -> bool,
    mut op: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut tried = 1;
    loop {
        match op().await {
            Err(e) if tried < policy.tries && retryable(&e) => {
                let pause = policy.backoff.after(tried);
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                tried += 1;
            }
            other => return other,
        }
    }
}

/// When a [`Wait`] whose time is up gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// After a look that was not done and ended at or past the deadline: the last look may start
    /// just before the deadline and end after it, and what it found still counts.
    AfterLook,
    /// After the sleep that crossed the deadline, without another look (MultiKueue's token wait).
    AfterSleep,
}

/// A bounded poll: look at once, and again every `every`, until a look is done or `timeout` has
/// passed.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    timeout: Duration,
    every: Duration,
    give_up: GiveUp,
    since: Option<Instant>,
}

/// What one look found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look<T, P> {
    /// The wait is over, with this.
    Done(T),
    /// Not yet: what is still awaited, shown while waiting and returned on a timeout.
    Pending(P),
}

/// A [`Wait`] that ran out of time: what its last look still awaited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOut<P>(pub P);

/// Which look of a [`Wait`] this is. (Handed to each look by reference, which also tells the
/// compiler that what the look borrows from the caller outlives the look.)
#[derive(Debug)]
pub struct Round<'env> {
    number: u32,
    env: PhantomData<&'env ()>,
}

impl Round<'_> {
    /// The first look.
    pub fn first(&self) -> bool {
        self.number == 1
    }
}

/// A look in progress: boxed, so it may borrow the wait's state mutably for one look at a time,
/// and `Send`, so a wait inside a future callers spawn (an upgrade run) keeps it spawnable.
pub type Looking<'s, T> = Pin<Box<dyn Future<Output = T> + Send + 's>>;

impl Wait {
    /// Looks at once, then every `every`, for `timeout`, counted from the first look; gives up
    /// [`GiveUp::AfterLook`].
    pub fn new(timeout: Duration, every: Duration) -> Wait {
        Wait {
            timeout,
            every,
            give_up: GiveUp::AfterLook,
            since: None,
        }
    }

    /// Counts the time from `started` instead (work done before the first look is part of the
    /// wait).
    pub fn since(self, started: Instant) -> Wait {
        Wait {
            since: Some(started),
            ..self
        }
    }

    /// Gives up as `give_up` says.
    pub fn giving_up(self, give_up: GiveUp) -> Wait {
        Wait { give_up, ..self }
    }

    /// Looks (`look(state, round)`) until a look is done (`Ok(Ok(value))`), fails (`Err`, at once)
    /// or the time is up (`Ok(Err(TimedOut(what the last look still awaited)))`). Between two
    /// looks, `waiting` is told what is still awaited and how long the wait has taken so far, then
    /// the wait sleeps `every`.
    pub async fn until<'env, S, T, P, E, L, W>(
        self,
        state: &mut S,
        mut look: L,
        mut waiting: W,
    ) -> Result<Result<T, TimedOut<P>>, E>
    where
        L: for<'s> FnMut(&'s mut S, &'s Round<'env>) -> Looking<'s, Result<Look<T, P>, E>>,
        W: FnMut(&P, Duration),
    {
        let started = self.since.unwrap_or_else(Instant::now);
        let mut round = Round {
            number: 1,
            env: PhantomData,
        };
        loop {
            let pending = match look(state, &round).await? {
                Look::Done(value) => return Ok(Ok(value)),
                Look::Pending(p) => p,
            };
            match self.give_up {
                GiveUp::AfterLook => {
                    let elapsed = started.elapsed();
                    if elapsed >= self.timeout {
                        return Ok(Err(TimedOut(pending)));
                    }
                    waiting(&pending, elapsed);
                    tokio::time::sleep(self.every).await;
                }
                GiveUp::AfterSleep => {
                    waiting(&pending, started.elapsed());
                    tokio::time::sleep(self.every).await;
                    if started.elapsed() >= self.timeout {
                        return Ok(Err(TimedOut(pending)));
                    }
                }
            }
            round.number += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = Backoff::doubling(Duration::from_millis(100), Duration::from_millis(3200));
        let sleeps: Vec<u128> = (1..=8).map(|n| b.after(n).as_millis()).collect();
        assert_eq!(sleeps, [100, 200, 400, 800, 1600, 3200, 3200, 3200]);
        assert_eq!(
            Backoff::fixed(Duration::from_millis(300)).after(7),
            Duration::from_millis(300)
        );
        assert_eq!(Backoff::NONE.after(3), Duration::ZERO);
        // A first sleep above the cap is slept once, then the cap.
        let b = Backoff::doubling(5 * SECOND, 2 * SECOND);
        assert_eq!((b.after(1), b.after(2)), (5 * SECOND, 2 * SECOND));
        // No overflow however long it runs.
        assert_eq!(b.after(u32::MAX), 2 * SECOND);
    }

    /// An error that is worth another try (`true`) or not.
    #[derive(Debug, PartialEq)]
    struct Failure(bool);

    #[tokio::test(start_paused = true)]
    async fn a_retry_succeeds_on_the_nth_try_after_its_backoff() {
        let tries = AtomicU32::new(0);
        let start = Instant::now();
        let got = retry(
            API_CALL,
            |e: &Failure| e.0,
            || async {
                let n = tries.fetch_add(1, Ordering::SeqCst) + 1;
                if n < 4 { Err(Failure(true)) } else { Ok(n) }
            },
        )
        .await;
        assert_eq!(got, Ok(4));
        // Slept 100 + 200 + 400 ms, on tokio's paused clock.
        assert_eq!(start.elapsed(), Duration::from_millis(700));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_returns_the_last_error_once_its_tries_are_spent() {
        let tries = AtomicU32::new(0);
        let start = Instant::now();
        let got: Result<(), Failure> = retry(
            API_CALL,
            |e: &Failure| e.0,
            || async {
                tries.fetch_add(1, Ordering::SeqCst);
                Err(Failure(true))
            },
        )
        .await;
        assert_eq!(got, Err(Failure(true)));
        assert_eq!(tries.load(Ordering::SeqCst), 6);
        // No sleep after the last try.
        assert_eq!(start.elapsed(), Duration::from_millis(3100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_non_retryable_error_is_returned_at_once() {
        let tries = AtomicU32::new(0);
        let start = Instant::now();
        let got: Result<(), Failure> = retry(
            HIERARCHY,
            |e: &Failure| e.0,
            || async {
                tries.fetch_add(1, Ordering::SeqCst);
                Err(Failure(false))
            },
        )
        .await;
        assert_eq!(got, Err(Failure(false)));
        assert_eq!(tries.load(Ordering::SeqCst), 1);
        assert_eq!(start.elapsed(), Duration::ZERO);
        // Nor is anything retried with one try.
        let got: Result<(), Failure> = retry(
            Retry::ONCE,
            |_: &Failure| true,
            || async { Err(Failure(true)) },
        )
        .await;
        assert_eq!(got, Err(Failure(true)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_without_backoff_tries_again_at_once() {
        let tries = AtomicU32::new(0);
        let start = Instant::now();
        let got: Result<(), Failure> = retry(
            CONFLICT,
            |e: &Failure| e.0,
            || async {
                tries.fetch_add(1, Ordering::SeqCst);
                Err(Failure(true))
            },
        )
        .await;
        assert_eq!(got, Err(Failure(true)));
        assert_eq!(tries.load(Ordering::SeqCst), 5);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    /// Looks that are pending until look `done_at` (never: `u32::MAX`), each noted in `looks` with
    /// the time it started at.
    async fn poll(
        wait: Wait,
        done_at: u32,
    ) -> (Result<u32, TimedOut<u32>>, Vec<u64>, Vec<(u32, u64)>) {
        let start = Instant::now();
        let mut looks: Vec<u64> = Vec::new();
        let mut told = Vec::new();
        let got = wait
            .until(
                &mut looks,
                |looks, round| {
                    Box::pin(async move {
                        looks.push(start.elapsed().as_secs());
                        let n = u32::try_from(looks.len()).unwrap();
                        assert_eq!(round.first(), n == 1);
                        Ok::<_, Failure>(if n >= done_at {
                            Look::Done(n)
                        } else {
                            Look::Pending(n)
                        })
                    })
                },
                |n, elapsed| told.push((*n, elapsed.as_secs())),
            )
            .await
            .unwrap();
        (got, looks, told)
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_looks_at_once_and_is_done_on_the_nth_look() {
        let (got, looks, told) = poll(Wait::new(10 * SECOND, 2 * SECOND), 3).await;
        assert_eq!(got, Ok(3));
        assert_eq!(looks, [0, 2, 4]);
        assert_eq!(told, [(1, 0), (2, 2)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_gives_up_after_the_look_that_reaches_its_deadline() {
        let (got, looks, told) = poll(Wait::new(10 * SECOND, 3 * SECOND), u32::MAX).await;
        // The look at 12 s is the first to end past 10 s: it still counts, then the wait ends.
        assert_eq!(got, Err(TimedOut(5)));
        assert_eq!(looks, [0, 3, 6, 9, 12]);
        assert_eq!(told, [(1, 0), (2, 3), (3, 6), (4, 9)]);
        // A look done just past the deadline is done.
        let (got, _, _) = poll(Wait::new(10 * SECOND, 3 * SECOND), 5).await;
        assert_eq!(got, Ok(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_giving_up_after_its_sleep_looks_no_more_past_the_deadline() {
        let wait = Wait::new(10 * SECOND, 3 * SECOND).giving_up(GiveUp::AfterSleep);
        let (got, looks, told) = poll(wait, u32::MAX).await;
        assert_eq!(got, Err(TimedOut(4)));
        assert_eq!(looks, [0, 3, 6, 9]);
        assert_eq!(told, [(1, 0), (2, 3), (3, 6), (4, 9)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_counts_from_when_it_says_it_started() {
        let started = Instant::now();
        tokio::time::sleep(7 * SECOND).await;
        let (got, looks, told) =
            poll(Wait::new(10 * SECOND, 2 * SECOND).since(started), u32::MAX).await;
        // Looks at 7, 9 and 11 s of the whole wait.
        assert_eq!(got, Err(TimedOut(3)));
        assert_eq!(looks, [0, 2, 4]);
        assert_eq!(told, [(1, 7), (2, 9)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_look_ends_the_wait_at_once() {
        let start = Instant::now();
        let mut looks = 0;
        let got: Result<Result<(), TimedOut<()>>, Failure> = Wait::new(10 * SECOND, SECOND)
            .until(
                &mut looks,
                |looks, _| {
                    Box::pin(async move {
                        *looks += 1;
                        if *looks == 2 {
                            Err(Failure(false))
                        } else {
                            Ok(Look::Pending(()))
                        }
                    })
                },
                |_, _| {},
            )
            .await;
        assert_eq!(got, Err(Failure(false)));
        assert_eq!(looks, 2);
        assert_eq!(start.elapsed(), SECOND);
    }
}
