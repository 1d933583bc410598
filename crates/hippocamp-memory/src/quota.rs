//! Quotas in two tiers, both always enforced: per exact scope and global.
//!
//! The per-scope check runs under the scope's write lock against the
//! scope's own counters. The global tier is a [`GlobalQuota`] of atomic
//! counters that writers reserve from before committing and release on
//! delete; it can be shared by many stores (one per router worker) so the
//! budget is one budget however the scopes are spread.

use std::sync::atomic::{AtomicU64, Ordering};

use hippocamp_core::{Error, MemoryLimits, QuotaLimit, Result};

/// Checks that a scope holding `entries`/`bytes` can take `add_entries`
/// more entries of `add_bytes`.
pub fn check_scope_quota(
    limits: &MemoryLimits,
    entries: u64,
    bytes: u64,
    add_entries: u64,
    add_bytes: u64,
) -> Result<()> {
    if entries.saturating_add(add_entries) > limits.max_entries_per_scope {
        return Err(Error::QuotaExceeded {
            limit: QuotaLimit::EntriesPerScope(limits.max_entries_per_scope),
        });
    }
    if bytes.saturating_add(add_bytes) > limits.max_bytes_per_scope {
        return Err(Error::QuotaExceeded {
            limit: QuotaLimit::BytesPerScope(limits.max_bytes_per_scope),
        });
    }
    Ok(())
}

/// Store-wide entry and byte budget.
#[derive(Debug)]
pub struct GlobalQuota {
    entries: AtomicU64,
    bytes: AtomicU64,
    max_entries: u64,
    max_bytes: u64,
}

impl GlobalQuota {
    /// A budget of `max_entries_total` and `max_bytes_total`.
    pub fn new(limits: &MemoryLimits) -> Self {
        Self {
            entries: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            max_entries: limits.max_entries_total,
            max_bytes: limits.max_bytes_total,
        }
    }

    /// Entries and bytes in use.
    pub fn used(&self) -> (u64, u64) {
        (
            self.entries.load(Ordering::Acquire),
            self.bytes.load(Ordering::Acquire),
        )
    }

    /// Reserves room; the reservation is returned unless committed.
    pub fn reserve(&self, entries: u64, bytes: u64) -> Result<Reservation<'_>> {
        let take = |counter: &AtomicU64, n: u64, max: u64| {
            counter
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                    cur.checked_add(n).filter(|&next| next <= max)
                })
                .is_ok()
        };
        if !take(&self.entries, entries, self.max_entries) {
            return Err(Error::QuotaExceeded {
                limit: QuotaLimit::EntriesTotal(self.max_entries),
            });
        }
        if !take(&self.bytes, bytes, self.max_bytes) {
            self.entries.fetch_sub(entries, Ordering::AcqRel);
            return Err(Error::QuotaExceeded {
                limit: QuotaLimit::BytesTotal(self.max_bytes),
            });
        }
        Ok(Reservation {
            quota: self,
            entries,
            bytes,
        })
    }

    /// Returns room freed by deletes.
    pub fn release(&self, entries: u64, bytes: u64) {
        let give = |counter: &AtomicU64, n: u64| {
            // Saturate rather than wrap if a caller over-releases.
            let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                Some(cur.saturating_sub(n))
            });
        };
        give(&self.entries, entries);
        give(&self.bytes, bytes);
    }

    /// Records usage found when loading existing data (it may exceed the
    /// budget if limits were lowered; new writes then fail until deletes
    /// make room).
    pub fn add_existing(&self, entries: u64, bytes: u64) {
        self.entries.fetch_add(entries, Ordering::AcqRel);
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }
}

/// Room taken from a [`GlobalQuota`]; released on drop unless committed.
#[derive(Debug)]
#[must_use = "a reservation is released when dropped"]
pub struct Reservation<'a> {
    quota: &'a GlobalQuota,
    entries: u64,
    bytes: u64,
}

impl Reservation<'_> {
    /// Keeps the room: the write committed.
    pub fn commit(mut self) {
        self.entries = 0;
        self.bytes = 0;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.entries > 0 || self.bytes > 0 {
            self.quota.release(self.entries, self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_released_unless_committed() {
        let q = GlobalQuota::new(&MemoryLimits {
            max_entries_total: 2,
            max_bytes_total: 100,
            max_entries_per_scope: 2,
            max_bytes_per_scope: 100,
            ..MemoryLimits::default()
        });
        q.reserve(1, 10).unwrap().commit();
        assert_eq!(q.used(), (1, 10));
        drop(q.reserve(1, 10).unwrap());
        assert_eq!(q.used(), (1, 10));
        assert!(matches!(
            q.reserve(2, 1),
            Err(Error::QuotaExceeded {
                limit: QuotaLimit::EntriesTotal(2)
            })
        ));
        assert!(matches!(
            q.reserve(1, 91),
            Err(Error::QuotaExceeded {
                limit: QuotaLimit::BytesTotal(100)
            })
        ));
        assert_eq!(q.used(), (1, 10), "a failed reservation takes nothing");
        q.release(1, 10);
        assert_eq!(q.used(), (0, 0));
    }

    #[test]
    fn scope_quota() {
        let l = MemoryLimits {
            max_entries_per_scope: 2,
            max_bytes_per_scope: 100,
            ..MemoryLimits::default()
        };
        assert!(check_scope_quota(&l, 1, 0, 1, 100).is_ok());
        assert!(matches!(
            check_scope_quota(&l, 2, 0, 1, 1),
            Err(Error::QuotaExceeded {
                limit: QuotaLimit::EntriesPerScope(2)
            })
        ));
        assert!(matches!(
            check_scope_quota(&l, 0, 50, 1, 51),
            Err(Error::QuotaExceeded {
                limit: QuotaLimit::BytesPerScope(100)
            })
        ));
    }
}
