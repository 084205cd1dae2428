//! The open-files limit: raised from its soft value to the hard one at start,
//! as every Go program does since Go 1.19 (kube-apiserver, kubelet, client-go
//! tools). With the usual soft limit of 1024 a proxy would stop accepting
//! connections after about a thousand clients, while the hard limit
//! (often 524288 or more) is there for the asking.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Raises the soft limit on open files to the hard limit. Returns the limit
/// now in force (`None`: unlimited or unknown); a failure leaves it as it
/// was and is logged.
pub fn raise_open_files_limit() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return limit.current;
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::debug!(from = ?limit.current, to = ?limit.maximum, "raised the open-files limit");
            limit.maximum
        }
        Err(err) => {
            tracing::warn!(error = %err, soft = ?limit.current, "cannot raise the open-files limit");
            limit.current
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowered_soft_limit_is_raised_to_the_hard_one() {
        let before = getrlimit(Resource::Nofile);
        let Some(hard) = before.maximum else {
            return; // unlimited: nothing to raise
        };
        // Lowering the soft limit needs no privilege.
        let lowered = Rlimit {
            current: Some(hard - 1),
            maximum: Some(hard),
        };
        setrlimit(Resource::Nofile, lowered).unwrap();
        assert_eq!(getrlimit(Resource::Nofile).current, Some(hard - 1));
        assert_eq!(raise_open_files_limit(), Some(hard));
        assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
    }
}
