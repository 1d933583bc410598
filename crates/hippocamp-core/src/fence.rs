//! Erasure fences: what a writer read before it admitted work, carried
//! with its writes so a store refuses them once an erasure came between.
//!
//! Every store that holds a user's data (memory, agent sessions) keeps two
//! counters: the scope's erasure epoch, advanced by erasing the user, and
//! each session's, advanced by erasing the session. A queue, a runner or a
//! restore reads both before it starts ([`ErasureFence`]); a write that
//! carries them is refused (`StaleEpoch`) at the store's commit point once
//! either has advanced, so nothing admitted before an erasure lands after
//! it, on any server.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The erasures a scope and one of its sessions have seen.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ErasureFence {
    /// The scope's erasure epoch (advanced by erasing the user).
    pub epoch: u64,
    /// The session's erasure epoch (advanced by erasing the session).
    pub session_epoch: u64,
}

/// Checks a write's fence against what the store holds now: an older
/// epoch is stale (an erasure came after its admission), a newer one was
/// never handed out.
pub fn check_epoch(admitted: Option<u64>, current: u64) -> Result<()> {
    match admitted {
        Some(a) if a < current => Err(Error::StaleEpoch {
            admitted: a,
            current,
        }),
        Some(a) if a > current => Err(Error::FutureEpoch {
            admitted: a,
            current,
        }),
        _ => Ok(()),
    }
}

/// [`check_epoch`] for both halves of a fence, the scope's first.
pub fn check_fence(admitted: Option<ErasureFence>, current: ErasureFence) -> Result<()> {
    if let Some(a) = admitted {
        check_epoch(Some(a.epoch), current.epoch)?;
        check_epoch(Some(a.session_epoch), current.session_epoch)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_refuse_older_and_newer_epochs() {
        let now = ErasureFence {
            epoch: 2,
            session_epoch: 5,
        };
        assert!(check_fence(None, now).is_ok());
        assert!(check_fence(Some(now), now).is_ok());
        let stale_scope = ErasureFence { epoch: 1, ..now };
        assert!(matches!(
            check_fence(Some(stale_scope), now),
            Err(Error::StaleEpoch {
                admitted: 1,
                current: 2
            })
        ));
        let stale_session = ErasureFence {
            session_epoch: 4,
            ..now
        };
        assert!(matches!(
            check_fence(Some(stale_session), now),
            Err(Error::StaleEpoch {
                admitted: 4,
                current: 5
            })
        ));
        let future = ErasureFence {
            session_epoch: 6,
            ..now
        };
        assert!(matches!(
            check_fence(Some(future), now),
            Err(Error::FutureEpoch { .. })
        ));
    }
}
