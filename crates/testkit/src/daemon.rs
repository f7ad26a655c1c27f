//! Reading a `netsiftd` flow in tests.

use std::time::{Duration, Instant};

use netsift_daemon::Flow;

/// Every packet of `flow` until its source ended; panics if that takes longer than `limit`.
pub fn drain(flow: &mut Flow, limit: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + limit;
    loop {
        let r = flow.reader();
        r.wait_for(64, Duration::from_millis(20));
        while let Some(p) = r.next() {
            got.push(p.data.to_vec());
        }
        r.release();
        if r.is_finished() {
            return got;
        }
        assert!(Instant::now() < deadline, "the flow never finished");
    }
}
