//! The open-files limit: raised to the hard limit when the clients need more.

use crate::error::EngineError;

/// Make sure `needed` files can be open, raising the soft limit up to the hard one if necessary.
pub(crate) fn ensure_open_files(needed: u64) -> Result<(), EngineError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    if soft >= needed {
        return Ok(());
    }
    if hard > soft {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we own.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
    // SAFETY: as above.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 || lim.rlim_cur < needed {
        return Err(EngineError::FdLimit {
            needed,
            limit: lim.rlim_cur,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_needs_pass_and_impossible_ones_name_the_fix() {
        ensure_open_files(16).unwrap();
        let e = ensure_open_files(u64::MAX / 2).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(&format!("ulimit -n {}", u64::MAX / 2)), "{msg}");
    }
}
