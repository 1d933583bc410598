//! Claims of a store owned by one process: leases held in memory, checked
//! with a monotonic clock.
//!
//! A store that one process owns (the in-memory store, the embedded store
//! whose directory is locked) keeps its leases here rather than on disk:
//! a restart voids every lease by construction (an attempt cut short by it
//! is not counted), and the clock is `Instant`, so a wall-clock jump can
//! never make a lease look expired to one owner and valid to another
//! (weakness W9 of the reference). The persisted rows only know pending
//! and finished jobs; "running" is a pending job with a valid lease here.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hippocamp_core::{Error, Result};
use parking_lot::Mutex;

use crate::model::{JobId, Owner};

/// A claim.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    /// The claim's token.
    pub owner: Owner,
    /// When it expires.
    pub until: Instant,
    /// The attempt it is (1-based).
    pub attempt: u32,
}

/// The store's clock: milliseconds on a monotonic clock that continues
/// from `base` (the embedded store persists the last value it used, so
/// due times stay ordered across restarts).
#[derive(Debug)]
pub struct Clock {
    base: u64,
    start: Instant,
}

impl Clock {
    /// A clock reading `base` now.
    pub fn starting_at(base: u64) -> Self {
        Self {
            base,
            start: Instant::now(),
        }
    }

    /// Now, in store milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.base
            .saturating_add(u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX))
    }
}

/// The leases of a store.
#[derive(Debug, Default)]
pub struct Leases {
    map: Mutex<HashMap<JobId, Lease>>,
}

/// What taking a lease found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// A fresh claim.
    Fresh,
    /// A claim over an earlier one that expired (that attempt failed).
    AfterExpiry,
    /// Someone holds a valid lease.
    Held,
}

impl Leases {
    /// Whether `job` is under a valid lease.
    pub fn is_held(&self, job: &JobId) -> bool {
        self.map
            .lock()
            .get(job)
            .is_some_and(|l| l.until > Instant::now())
    }

    /// Takes a lease of `lease` on `job` for `owner` unless someone holds
    /// a valid one.
    pub fn take(&self, job: JobId, owner: Owner, lease: Duration, attempt: u32) -> Taken {
        let now = Instant::now();
        let mut map = self.map.lock();
        let found = match map.get(&job) {
            Some(l) if l.until > now => return Taken::Held,
            Some(_) => Taken::AfterExpiry,
            None => Taken::Fresh,
        };
        map.insert(
            job,
            Lease {
                owner,
                until: now + lease,
                attempt,
            },
        );
        found
    }

    /// Sets the attempt number of `job`'s lease.
    pub fn set_attempt(&self, job: &JobId, attempt: u32) {
        if let Some(l) = self.map.lock().get_mut(job) {
            l.attempt = attempt;
        }
    }

    /// `owner`'s valid lease on `job`, or `LeaseLost`.
    pub fn check(&self, job: &JobId, owner: &Owner) -> Result<Lease> {
        let map = self.map.lock();
        match map.get(job) {
            Some(l) if l.owner != *owner => Err(Error::LeaseLost("another owner holds the job")),
            Some(l) if l.until <= Instant::now() => Err(Error::LeaseLost("the lease expired")),
            Some(l) => Ok(*l),
            None => Err(Error::LeaseLost("the job is not claimed")),
        }
    }

    /// Extends `owner`'s valid lease on `job` to `lease` from now.
    pub fn renew(&self, job: &JobId, owner: &Owner, lease: Duration) -> Result<()> {
        let now = Instant::now();
        let mut map = self.map.lock();
        match map.get_mut(job) {
            Some(l) if l.owner != *owner => Err(Error::LeaseLost("another owner holds the job")),
            Some(l) if l.until <= now => Err(Error::LeaseLost("the lease expired")),
            Some(l) => {
                l.until = now + lease;
                Ok(())
            }
            None => Err(Error::LeaseLost("the job is not claimed")),
        }
    }

    /// Ends `owner`'s lease on `job`, valid or expired, unless someone else
    /// took the job since (`LeaseLost`): a claim handed back before its
    /// delivery started.
    pub fn give_back(&self, job: &JobId, owner: &Owner) -> Result<()> {
        let mut map = self.map.lock();
        match map.get(job) {
            Some(l) if l.owner == *owner => {
                map.remove(job);
                Ok(())
            }
            Some(_) => Err(Error::LeaseLost("another owner holds the job")),
            None => Err(Error::LeaseLost("the job is not claimed")),
        }
    }

    /// The valid lease on `job`, if any.
    pub fn get(&self, job: &JobId) -> Option<Lease> {
        self.map
            .lock()
            .get(job)
            .copied()
            .filter(|l| l.until > Instant::now())
    }

    /// Forgets `job`'s lease (it ended or was handed back).
    pub fn end(&self, job: &JobId) {
        self.map.lock().remove(job);
    }

    /// Forgets `job`'s lease if `owner` holds it (a later claimant's lease
    /// is left alone).
    pub fn end_owned(&self, job: &JobId, owner: &Owner) {
        let mut map = self.map.lock();
        if map.get(job).is_some_and(|l| l.owner == *owner) {
            map.remove(job);
        }
    }

    /// Jobs under a valid lease (bounded by the number of workers).
    pub fn running(&self) -> u64 {
        let now = Instant::now();
        self.map.lock().values().filter(|l| l.until > now).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_fences_every_other_owner_and_expires() {
        let leases = Leases::default();
        let job = JobId::from_bytes([1; 16]);
        let (a, b) = (Owner::random(), Owner::random());
        assert_eq!(
            leases.take(job, a, Duration::from_millis(40), 1),
            Taken::Fresh
        );
        assert_eq!(
            leases.take(job, b, Duration::from_millis(40), 1),
            Taken::Held
        );
        assert!(leases.check(&job, &b).is_err());
        assert!(leases.renew(&job, &b, Duration::from_secs(1)).is_err());
        assert!(leases.check(&job, &a).is_ok());
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(leases.check(&job, &a), Err(Error::LeaseLost(_))));
        assert!(leases.renew(&job, &a, Duration::from_secs(1)).is_err());
        assert_eq!(
            leases.take(job, b, Duration::from_secs(1), 2),
            Taken::AfterExpiry
        );
        assert!(leases.check(&job, &a).is_err());
        assert_eq!(leases.check(&job, &b).unwrap().attempt, 2);
        assert_eq!(leases.running(), 1);
    }

    #[test]
    fn the_clock_continues_from_its_base() {
        let c = Clock::starting_at(1_000);
        assert!(c.now_ms() >= 1_000);
    }
}
