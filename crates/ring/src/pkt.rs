//! [`Pkt`]: a packet as the writer of a flow group (and the filters of the graph) see it.

use netsift_capture::{LinkType, Timestamp};

/// A packet as filters see it.
#[derive(Clone, Copy, Debug)]
pub struct Pkt<'a> {
    /// The captured bytes (possibly cut by an upstream `snap`).
    pub data: &'a [u8],
    /// The length on the wire.
    pub wire_len: u32,
    /// When it was captured.
    pub timestamp: Timestamp,
    /// The link type of `data`.
    pub link_type: LinkType,
}
