use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use netsift_capture::{LinkType, Timestamp};

use crate::Pkt;
use crate::shm::{Mem, Region};

use super::group::Group;
use super::layout::{Preference, ReaderId, SlotRef, decode_header, lock, ring_back};
use super::reader::Reader;
use super::wait::{futex_wait, futex_wake};

/// Reads that found their slot overwritten after copying it (so tests can show that the
/// race they exercise happens).
pub(super) static TORN: AtomicU64 = AtomicU64::new(0);

/// The length of test packet `seq`: 16 ..= 215 bytes.
fn len_of(seq: u64) -> usize {
    16 + (seq.wrapping_mul(7) % 200) as usize
}

/// Test packet `seq`: its number, then bytes that depend on it.
fn payload(seq: u64) -> Vec<u8> {
    let mut v = vec![0; len_of(seq)];
    v[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in v[8..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8);
    }
    v
}

/// The number of an intact test packet (cut to `snap` bytes), `None` if it is torn.
fn check(data: &[u8], snap: usize) -> Option<u64> {
    let seq = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
    let want = payload(seq);
    (want[..want.len().min(snap)] == *data).then_some(seq)
}

fn pkt(data: &[u8]) -> Pkt<'_> {
    Pkt {
        data,
        wire_len: data.len() as u32,
        timestamp: Timestamp::new(data.len() as i64, 7),
        link_type: LinkType::ETHERNET,
    }
}

/// Burn a little CPU: a deliberately slow reader.
fn dawdle(n: u32) {
    for i in 0..n {
        std::hint::black_box(i);
        std::hint::spin_loop();
    }
}

/// Map a shared reader's regions as another process would: PBuf and IBuf from read-only
/// descriptors, the control page read-write.
fn attach_like_a_client(r: &Reader) -> Reader {
    let regions = r.shared_regions().expect("a shared group");
    let ro = |reg: &Region| Region::map(reg.read_only_fd().unwrap(), false).unwrap();
    let ctrl = Region::map(regions.ctrl.fd().try_clone_to_owned().unwrap(), true).unwrap();
    Reader::attach(ro(regions.pbuf), ro(regions.ibuf), ctrl).unwrap()
}

#[test]
fn readers_sharing_an_ibuf_each_read_every_entry_once() {
    for pref in [Preference::SlowReader, Preference::FastReader] {
        let g = Group::new(64, 256, pref);
        let (a, mut ra) = g.add_reader(16);
        let mut w = g.writer().unwrap();
        for seq in 0..5u64 {
            w.write(&pkt(&payload(seq)), &[(a, 1)]);
        }
        // B joins at the IBuf's end: the first five packets are not its.
        let (b, mut rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
        assert!(
            Arc::ptr_eq(&ra.ibuf.ring, &rb.ibuf.ring),
            "one ring for both"
        );
        let (c, mut rc) = g.add_reader(16);
        let (mut got_a, mut got_b, mut got_c) = (Vec::new(), Vec::new(), Vec::new());
        for seq in 5..45u64 {
            // Delivered through both of the sharing readers (as a plan naming both would):
            // one entry.
            w.write(&pkt(&payload(seq)), &[(a, 1), (b, 1), (c, 2)]);
            for (r, got) in [(&mut ra, &mut got_a), (&mut rb, &mut got_b)] {
                while let Some(d) = r.next() {
                    assert_eq!(d.result, 1);
                    got.push(check(d.data, usize::MAX).expect("intact"));
                }
                r.release();
            }
            while let Some(d) = rc.next() {
                got_c.push(check(d.data, usize::MAX).expect("intact"));
            }
            rc.release();
        }
        assert_eq!(got_a, (0..45).collect::<Vec<_>>(), "{pref:?}");
        assert_eq!(got_b, (5..45).collect::<Vec<_>>(), "{pref:?}");
        assert_eq!(got_c, (5..45).collect::<Vec<_>>(), "{pref:?}");
        let (sa, sb) = (g.reader_stats(a).unwrap(), g.reader_stats(b).unwrap());
        assert_eq!((sa.appended, sa.delivered), (45, 45), "{pref:?}");
        assert_eq!((sb.appended, sb.delivered), (40, 40), "{pref:?}");
        // A leaves; B keeps reading the ring.
        drop(ra);
        for seq in 45..50u64 {
            w.write(&pkt(&payload(seq)), &[(b, 1)]);
        }
        let mut more = Vec::new();
        while let Some(d) = rb.next() {
            more.push(check(d.data, usize::MAX).expect("intact"));
        }
        assert_eq!(more, (45..50).collect::<Vec<_>>());
        assert!(g.try_add_reader_sharing(a).unwrap().is_none(), "A is gone");
    }
}

#[test]
fn a_shared_ibuf_is_full_when_its_slowest_reader_is_behind() {
    let g = Group::new(64, 256, Preference::SlowReader);
    let (a, mut ra) = g.add_reader(8);
    let (b, mut rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
    let mut w = g.writer().unwrap();
    // A reads everything at once; B reads nothing: the ring holds 8 entries.
    for seq in 0..12u64 {
        w.write(&pkt(&payload(seq)), &[(a, 0), (b, 0)]);
        while ra.next().is_some() {}
        ra.release();
    }
    let (sa, sb) = (g.reader_stats(a).unwrap(), g.reader_stats(b).unwrap());
    // Dropped once per packet for the ring, however many readers it was noted for.
    assert_eq!((sa.appended, sa.dropped, sa.delivered), (8, 4, 8));
    assert_eq!((sb.appended, sb.dropped, sb.delivered), (8, 4, 0));
    let got: Vec<u64> =
        std::iter::from_fn(|| rb.next().map(|d| check(d.data, 999).unwrap())).collect();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
    rb.release();
    w.write(&pkt(&payload(12)), &[(a, 0), (b, 0)]);
    assert_eq!(check(rb.next().unwrap().data, 999), Some(12));
    assert_eq!(check(ra.next().unwrap().data, 999), Some(12));
    // A full PBuf counts a packet dropped once for the ring too.
    let g = Group::new(2, 256, Preference::SlowReader);
    let (a, _ra) = g.add_reader(8);
    let (b, _rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
    let mut w = g.writer().unwrap();
    for seq in 0..5u64 {
        w.write(&pkt(&payload(seq)), &[(a, 0), (b, 0)]);
    }
    assert_eq!(g.reader_stats(a).unwrap().dropped, 3);
    assert_eq!(g.reader_stats(b).unwrap().dropped, 3);
}

#[test]
fn attached_readers_share_an_ibuf_through_their_own_control_pages() {
    let g = Group::new_shared(64, 256, Preference::SlowReader).unwrap();
    let (a, ra) = g.try_add_reader(32).unwrap();
    let (b, rb) = g.try_add_reader_sharing(a).unwrap().unwrap();
    let (x, y) = (ra.shared_regions().unwrap(), rb.shared_regions().unwrap());
    assert_eq!(
        x.ibuf.fd().as_raw_fd(),
        y.ibuf.fd().as_raw_fd(),
        "one IBuf file"
    );
    assert_ne!(x.ctrl.fd().as_raw_fd(), y.ctrl.fd().as_raw_fd());
    let mut ca = attach_like_a_client(&ra);
    let mut cb = attach_like_a_client(&rb);
    let mut w = g.writer().unwrap();
    for seq in 0..20u64 {
        w.write(&pkt(&payload(seq)), &[(b, 3)]);
    }
    for c in [&mut ca, &mut cb] {
        let got: Vec<u64> =
            std::iter::from_fn(|| c.next().map(|d| check(d.data, 999).unwrap())).collect();
        assert_eq!(got, (0..20).collect::<Vec<_>>());
        c.release();
    }
    assert_eq!(g.reader_stats(a).unwrap().delivered, 20);
    assert_eq!(g.reader_stats(b).unwrap().delivered, 20);
}

#[test]
fn shared_groups_are_read_through_mappings() {
    for pref in [Preference::SlowReader, Preference::FastReader] {
        let g = Group::new_shared(8, 256, pref).unwrap();
        assert!(g.is_shared());
        let (a, ra) = g.try_add_reader(16).unwrap();
        let (b, rb) = g.try_add_reader(16).unwrap();
        let mut ca = attach_like_a_client(&ra);
        let mut cb = attach_like_a_client(&rb);
        assert_eq!(ca.preference(), pref);
        assert!(
            Group::new(4, 64, pref)
                .add_reader(4)
                .1
                .shared_regions()
                .is_none()
        );
        let mut w = g.writer().unwrap();
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        for seq in 0..40u64 {
            let p = payload(seq);
            let to: Vec<(ReaderId, u32)> = [(a, 1), (b, 2)]
                .into_iter()
                .filter(|&(id, _)| id != b || seq % 3 == 0)
                .collect();
            w.write(&pkt(&p), &to);
            // Reader A keeps up; B reads every 10 packets.
            while let Some(d) = ca.next() {
                assert_eq!(d.result, 1);
                got_a.push(check(d.data, usize::MAX).expect("intact"));
            }
            ca.release();
            if seq % 10 == 9 {
                while let Some(d) = cb.next() {
                    assert_eq!(d.result, 2);
                    got_b.push(check(d.data, usize::MAX).expect("intact"));
                }
                cb.release();
            }
        }
        // The creator sees the attached readers' counters through the control pages. Under
        // slow-reader preference B's held slots make the group drop packets (for A too).
        let sa = g.reader_stats(a).unwrap();
        assert_eq!(sa.delivered, got_a.len() as u64);
        assert_eq!(sa.delivered + sa.dropped, 40, "{pref:?} {sa:?}");
        assert!(got_a.windows(2).all(|w| w[0] < w[1]));
        if pref == Preference::FastReader {
            assert_eq!(got_a, (0..40).collect::<Vec<_>>());
        } else {
            assert!(sa.dropped > 0, "B held the PBuf");
        }
        let sb = g.reader_stats(b).unwrap();
        assert!(sb.appended <= 14);
        assert_eq!(
            sb.delivered + sb.dropped + sb.overwritten,
            14,
            "{pref:?} {sb:?}"
        );
        assert_eq!(got_b.len() as u64, sb.delivered);
        assert!(!cb.is_finished());
        drop(w);
        assert!(cb.is_finished(), "the finished flag is in the PBuf");
        // Regions the wrong way round are refused with a message.
        let regions = ra.shared_regions().unwrap();
        // (The PBuf and IBuf are sealed against writable mappings: read-only ones.)
        let rw = |reg: &Region| Region::map(reg.fd().try_clone_to_owned().unwrap(), true).unwrap();
        let ro = |reg: &Region| Region::map(reg.read_only_fd().unwrap(), false).unwrap();
        assert!(Region::map(regions.pbuf.fd().try_clone_to_owned().unwrap(), true).is_err());
        let e = Reader::attach(ro(regions.ibuf), ro(regions.pbuf), rw(regions.ctrl)).unwrap_err();
        assert_eq!(e.to_string(), "the PBuf is not a netsift packet buffer");
        let e = Reader::attach(ro(regions.pbuf), rw(regions.ctrl), rw(regions.ctrl)).unwrap_err();
        assert_eq!(e.to_string(), "the IBuf is not a netsift index buffer");
        let e = Reader::attach(ro(regions.pbuf), ro(regions.ibuf), ro(regions.ctrl)).unwrap_err();
        assert!(e.to_string().contains("writable"));
    }
}

#[test]
fn futex_wake_crosses_mappings_and_attached_readers_are_woken() {
    let g = Group::new_shared(8, 64, Preference::SlowReader).unwrap();
    let (id, creator) = g.try_add_reader(8).unwrap();
    // The futex itself: a waiter on the read-only mapping (another address) is woken
    // through the creator's mapping long before its 5 s timeout.
    let client = attach_like_a_client(&creator);
    let t = Instant::now();
    let waiter = thread::spawn(move || {
        let w = &client.ibuf.ring.writer.w;
        futex_wait(w, w.load(Ordering::Relaxed) as u32, Duration::from_secs(5));
        client
    });
    let mut client = loop {
        thread::sleep(Duration::from_millis(20));
        futex_wake(&creator.ibuf.ring.writer.w);
        if waiter.is_finished() {
            break waiter.join().unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(4),
            "the wake-up never arrived"
        );
    };
    // The protocol: the attached reader announces its target; the creator wakes it once
    // the packet is there.
    assert!(!creator.wake_attached(false), "nobody waits yet");
    let waiter = thread::spawn(move || {
        let n = client.wait_for(1, Duration::from_secs(10));
        (n, client)
    });
    while creator.ibuf.reader.wait_target.load(Ordering::SeqCst) == 0 {
        thread::yield_now();
    }
    let mut w = g.writer().unwrap();
    w.write(&pkt(&payload(1)), &[(id, 0)]).unwrap();
    let woke = creator.wake_attached(false);
    let (n, mut client) = waiter.join().unwrap();
    assert_eq!(n, 1);
    assert!(woke || creator.ibuf.reader.wait_target.load(Ordering::SeqCst) == 0);
    assert_eq!(check(client.next().unwrap().data, 256), Some(1));
}

#[test]
fn a_lying_reader_cannot_break_the_writer() {
    let g = Group::new_shared(4, 64, Preference::SlowReader).unwrap();
    let (a, ra) = g.try_add_reader(4).unwrap();
    let client = attach_like_a_client(&ra);
    let ctrl = Arc::clone(client.ibuf.reader.region().unwrap());
    let r: Mem<AtomicU64> = Mem::in_region(&ctrl, 0, 1).unwrap();
    let mut w = g.writer().unwrap();
    for (i, lie) in [u64::MAX, 7, 0, u64::MAX / 2].into_iter().enumerate() {
        r[0].store(lie, Ordering::Release);
        let p = payload(i as u64);
        w.write(&pkt(&p), &[(a, 1)]);
    }
    let st = g.reader_stats(a).unwrap();
    assert_eq!(st.appended + st.dropped, 4);
}

/// What a hostile application holding a descriptor tries on a shared file: reopen it
/// read-write through `/proc/self/fd` (allowed for root, as these tests run), map it writable,
/// make a read-only mapping writable, write to it, resize it, seal it further. Returns which
/// attempts succeeded.
fn attacks_that_succeed(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> Vec<&'static str> {
    let mut ok = Vec::new();
    let path = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
    // SAFETY: plain system calls on descriptors this function owns and closes; mappings are
    // unmapped before returning.
    unsafe {
        let rw = libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        assert!(
            rw >= 0,
            "reopen read-write: {}",
            std::io::Error::last_os_error()
        );
        let prot_rw = libc::PROT_READ | libc::PROT_WRITE;
        let m = libc::mmap(std::ptr::null_mut(), len, prot_rw, libc::MAP_SHARED, rw, 0);
        if m != libc::MAP_FAILED {
            ok.push("writable shared mapping");
            libc::munmap(m, len);
        }
        let m = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            rw,
            0,
        );
        assert_ne!(m, libc::MAP_FAILED, "a read-only mapping");
        if libc::mprotect(m, len, prot_rw) == 0 {
            ok.push("mprotect to writable");
        }
        libc::munmap(m, len);
        if libc::pwrite(rw, [0xffu8; 8].as_ptr().cast(), 8, 0) == 8 {
            ok.push("write(2)");
        }
        for size in [0, 1, len as libc::off_t * 2] {
            if libc::ftruncate(rw, size) == 0 {
                ok.push("ftruncate");
            }
        }
        if libc::fallocate(rw, 0, 0, len as libc::off_t * 2) == 0 {
            ok.push("fallocate");
        }
        if libc::fcntl(rw, libc::F_ADD_SEALS, libc::F_SEAL_WRITE) == 0 {
            ok.push("add a seal");
        }
        libc::close(rw);
    }
    ok
}

#[test]
fn shared_files_resist_a_hostile_holder() {
    let g = Group::new_shared(8, 256, Preference::SlowReader).unwrap();
    let (a, ra) = g.try_add_reader(16).unwrap();
    let regions = ra.shared_regions().unwrap();
    for (name, region) in [("PBuf", regions.pbuf), ("IBuf", regions.ibuf)] {
        let fd = region.read_only_fd().unwrap();
        use std::os::fd::AsFd;
        assert_eq!(
            attacks_that_succeed(fd.as_fd(), region.len()),
            Vec::<&str>::new(),
            "{name}"
        );
    }
    // The control page and MBufs are the application's to write, never to resize or seal.
    let mbuf = crate::mbuf::MBuf::new_shared(4096).unwrap();
    for (name, region) in [
        ("control page", regions.ctrl),
        ("MBuf", mbuf.region().unwrap()),
    ] {
        assert_eq!(
            attacks_that_succeed(region.fd(), region.len()),
            [
                "writable shared mapping",
                "mprotect to writable",
                "write(2)"
            ],
            "{name}"
        );
        assert_eq!(region.len(), 4096, "{name} kept its size");
    }
    // The group still serves a reader (the attacked one's position is garbage now: write(2)
    // above filled it with 0xff; that is its own loss).
    let (b, rb) = g.try_add_reader(16).unwrap();
    let mut client = attach_like_a_client(&rb);
    let mut w = g.writer().unwrap();
    for seq in 0..4 {
        w.write(&pkt(&payload(seq)), &[(a, 1), (b, 1)]);
    }
    let mut got = 0;
    while client.next().is_some() {
        got += 1;
    }
    assert_eq!(got, 4);
}

#[test]
fn a_control_page_of_garbage_cannot_break_the_writer() {
    for pref in [Preference::SlowReader, Preference::FastReader] {
        let g = Group::new_shared(8, 64, pref).unwrap();
        let (a, ra) = g.try_add_reader(8).unwrap();
        let (b, rb) = g.try_add_reader(8).unwrap();
        let client = attach_like_a_client(&ra);
        let mut honest = attach_like_a_client(&rb);
        let ctrl = Arc::clone(client.ibuf.reader.region().unwrap());
        let words: Mem<AtomicU64> = Mem::in_region(&ctrl, 0, ctrl.len() / 8).unwrap();
        let mut w = g.writer().unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut honest_got = 0u64;
        for seq in 0..2_000u64 {
            for word in words.iter() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = match x % 4 {
                    0 => x,
                    1 => seq.wrapping_sub(x % 16),
                    2 => u64::MAX - x % 3,
                    _ => 0,
                };
                word.store(v, Ordering::Release);
            }
            w.write(&pkt(&payload(seq % 50)), &[(a, 1), (b, 2)]);
            while let Some(d) = honest.next() {
                assert_eq!(d.result, 2);
                honest_got += 1;
            }
            honest.release();
        }
        // The writer's own counts of the liar's IBuf stay exact; the honest reader in another
        // IBuf is hurt only under slow-reader preference, where the group's PBuf is shared.
        let st = g.reader_stats(a).unwrap();
        assert_eq!(st.appended + st.dropped, 2_000, "{pref:?} {st:?}");
        let sb = g.reader_stats(b).unwrap();
        assert_eq!(sb.appended + sb.dropped, 2_000, "{pref:?} {sb:?}");
        assert_eq!(honest_got, sb.appended, "{pref:?}");
        if pref == Preference::FastReader {
            assert_eq!(honest_got, 2_000);
        }
    }
}

#[test]
fn srp_single_thread_semantics() {
    let g = Group::new(4, 64, Preference::SlowReader);
    let (a, mut ra) = g.add_reader(16);
    let (b, mut rb) = g.add_reader(16);
    let mut w = g.writer().unwrap();
    let p0 = payload(0);
    let s0 = w.write(&pkt(&p0), &[(a, 10), (b, 20)]).unwrap();
    assert_eq!((s0.seq(), s0.index(), s0.wrap(4)), (0, 0, 0));
    w.write(&pkt(&payload(1)), &[(a, 11)]).unwrap();
    let long = payload(12); // 100 bytes, cut to 64
    assert_eq!(long.len(), 100);
    w.write(&pkt(&long), &[(b, 22)]).unwrap();
    assert_eq!(w.write(&pkt(&payload(3)), &[]), None, "nobody accepted it");
    assert_eq!(g.stats().copies, 3);

    let d = ra.next().unwrap();
    assert_eq!((check(d.data, 64), d.result, d.slot), (Some(0), 10, s0));
    assert_eq!(d.wire_len as usize, len_of(0));
    assert_eq!(d.timestamp, Timestamp::new(len_of(0) as i64, 7));
    assert_eq!(d.link_type, LinkType::ETHERNET);
    let d = ra.next().unwrap();
    assert_eq!(
        (check(d.data, 64), d.result, d.slot.seq()),
        (Some(1), 11, 1)
    );
    assert!(ra.next().is_none());
    assert_eq!(rb.next().unwrap().result, 20);
    let d = rb.next().unwrap();
    assert_eq!((d.data.len(), d.wire_len, d.result), (64, 100, 22));
    assert_eq!(check(d.data, 64), Some(12));

    // Nothing released: the PBuf (4 slots) is full after one more packet.
    assert!(w.write(&pkt(&payload(4)), &[(a, 1), (b, 1)]).is_some());
    assert_eq!(w.write(&pkt(&payload(5)), &[(a, 1), (b, 1)]), None);
    assert_eq!(g.stats().dropped, 1);
    assert_eq!(ra.stats().dropped, 1);
    assert_eq!(rb.stats().dropped, 1);
    // A releases; B still holds slot 0 (its entry for packet 0 is unreleased).
    ra.release();
    assert_eq!(w.write(&pkt(&payload(6)), &[(a, 1)]), None);
    assert_eq!(ra.stats().dropped, 2);
    rb.release();
    let s = w.write(&pkt(&payload(7)), &[(a, 7)]).unwrap();
    assert_eq!((s.seq(), s.index(), s.wrap(4)), (4, 0, 1));
    // The old reference to position 0 is stale now.
    assert!(!w.deliver(b, s0, 0));
    assert_eq!(rb.stats().dropped, 2);
    let d = ra.next().unwrap();
    assert_eq!((check(d.data, 64), d.result), (Some(4), 1));
    let d = ra.next().unwrap();
    assert_eq!((check(d.data, 64), d.result), (Some(7), 7));

    // A full IBuf drops for that reader only.
    let (c, mut rc) = g.add_reader(2);
    ra.release();
    assert_eq!(rb.next().map(|d| check(d.data, 64)), Some(Some(4)));
    rb.release();
    for i in 0..3 {
        let s = w.write_packet(&pkt(&payload(100 + i))).unwrap();
        assert_eq!(w.deliver(c, s, 0), i < 2);
        assert!(w.deliver(a, s, 0));
    }
    assert_eq!(rc.stats().dropped, 1);
    assert_eq!(rc.stats().appended, 2);
    assert_eq!(rc.next().map(|d| check(d.data, 64)), Some(Some(100)));
    drop(rc);
    let s = w.write_packet(&pkt(&payload(9))).unwrap();
    assert!(!w.deliver(c, s, 0), "removed reader");
    assert!(!w.note_dropped(c));
    assert_eq!(g.readers(), vec![a, b]);
    assert_eq!(g.reader_stats(c), None);
    assert_eq!(g.reader_stats(a).unwrap().appended, 7);
}

#[test]
fn a_slot_of_another_group_is_refused() {
    let g1 = Group::new(4, 64, Preference::SlowReader);
    let g2 = Group::new(4, 64, Preference::SlowReader);
    let (id, r) = g1.add_reader(8);
    let mut w1 = g1.writer().unwrap();
    let mut w2 = g2.writer().unwrap();
    w1.write_packet(&pkt(&payload(0))).unwrap();
    w1.write_packet(&pkt(&payload(1))).unwrap();
    let s1 = w1.write_packet(&pkt(&payload(2))).unwrap();
    w2.write_packet(&pkt(&payload(0))).unwrap();
    w2.write_packet(&pkt(&payload(1))).unwrap();
    let s2 = w2.write_packet(&pkt(&payload(2))).unwrap();
    assert_eq!(
        s1, s2,
        "same position, same index: indistinguishable, and harmless"
    );
    let forged = w2.write_packet(&pkt(&payload(3))).unwrap();
    w1.write_packet(&pkt(&payload(3))).unwrap();
    w1.write_packet(&pkt(&payload(4))).unwrap();
    let mut odd = forged;
    odd.index = 1; // position 3 lives in slot 3 of g1, not slot 1
    assert!(!w1.deliver(id, odd, 0));
    assert!(w1.deliver(id, forged, 0));
    assert_eq!(r.stats().dropped, 1);
    assert_eq!(ring_back(0, 1, 4), 3);
    assert_eq!(ring_back(3, 3, 4), 0);
    assert_eq!(ring_back(1, 4, 4), 1);
}

#[test]
fn writer_is_single() {
    let g = Group::new(2, 8, Preference::FastReader);
    let (id, mut r) = g.add_reader(4);
    let mut w = g.writer().unwrap();
    assert!(g.writer().is_none());
    assert!(!g.is_finished());
    w.finish();
    assert!(g.is_finished() && r.is_finished());
    assert!(
        g.writer().is_none(),
        "a finished writer is still the writer"
    );
    w.write(&pkt(&payload(0)), &[(id, 0)]).unwrap();
    assert!(!g.is_finished() && !r.is_finished());
    drop(w);
    assert!(g.is_finished() && !r.is_finished());
    assert!(r.next().is_some());
    assert!(r.is_finished());
    let _w = g.writer().unwrap();
    assert!(!g.is_finished());
}

#[test]
fn a_new_writer_respects_what_readers_hold() {
    let g = Group::new(2, 64, Preference::SlowReader);
    let (id, mut r) = g.add_reader(8);
    let mut w = g.writer().unwrap();
    for i in 0..2 {
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
    }
    drop(w);
    let mut w = g.writer().unwrap();
    assert!(w.write(&pkt(&payload(2)), &[(id, 0)]).is_none());
    assert_eq!(r.next().map(|d| check(d.data, 64)), Some(Some(0)));
    r.release();
    let s = w.write(&pkt(&payload(3)), &[(id, 0)]).unwrap();
    assert_eq!((s.seq(), s.index()), (2, 0));
    let got: Vec<_> = r.iter().map(|p| check(&p.data, 64).unwrap()).collect();
    assert_eq!(got, vec![1, 3]);
    assert_eq!(r.stats().dropped, 1);
}

#[test]
fn readers_share_one_copy() {
    for pref in [Preference::SlowReader, Preference::FastReader] {
        let g = Group::new(128, 256, pref);
        let readers: Vec<_> = (0..8).map(|_| g.add_reader(128)).collect();
        let to: Vec<_> = readers.iter().map(|(id, _)| (*id, id.index())).collect();
        let mut w = g.writer().unwrap();
        let slots: Vec<_> = (0..100)
            .map(|i| w.write(&pkt(&payload(i)), &to).unwrap())
            .collect();
        let st = g.stats();
        assert_eq!((st.copies, st.delivered, st.readers), (100, 0, 8));
        for (id, mut r) in readers {
            for (i, s) in slots.iter().enumerate() {
                let d = r.next().unwrap();
                assert_eq!(d.slot, *s);
                assert_eq!(d.result, id.index());
                assert_eq!(check(d.data, 256), Some(i as u64));
            }
            assert!(r.next().is_none());
        }
    }
}

#[test]
fn srp_slow_reader_stalls_the_group_frp_does_not() {
    for pref in [Preference::SlowReader, Preference::FastReader] {
        let g = Group::new(8, 256, pref);
        let (fast, mut rf) = g.add_reader(64);
        let (slow, mut rs) = g.add_reader(64);
        let mut w = g.writer().unwrap();
        let mut got = Vec::new();
        for i in 0..32 {
            w.write(&pkt(&payload(i)), &[(fast, 1), (slow, 2)]);
            // The fast reader keeps up; the slow one never reads.
            while let Some(d) = rf.next() {
                got.push(check(d.data, 256).unwrap());
            }
            rf.release();
        }
        let (f, s) = (rf.stats(), rs.stats());
        match pref {
            Preference::SlowReader => {
                assert_eq!(got, (0..8).collect::<Vec<_>>());
                assert_eq!((f.delivered, f.dropped), (8, 24));
                assert_eq!((s.appended, s.dropped), (8, 24));
                assert_eq!(g.stats().dropped, 24);
            }
            Preference::FastReader => {
                assert_eq!(got, (0..32).collect::<Vec<_>>());
                assert_eq!((f.delivered, f.dropped, f.overwritten), (32, 0, 0));
                let mut late = Vec::new();
                let mut lost = 0;
                while let Some(d) = rs.next() {
                    late.push(check(d.data, 256).unwrap());
                    lost += d.lost_before;
                }
                assert_eq!(late, (24..32).collect::<Vec<_>>());
                let s = rs.stats();
                assert_eq!((s.delivered, s.overwritten, lost), (8, 24, 24));
                assert_eq!(g.stats().overwritten, 24);
            }
        }
    }
}

#[test]
fn frp_reader_skips_ahead_in_its_ibuf() {
    let g = Group::new(64, 256, Preference::FastReader);
    let (id, mut r) = g.add_reader(4);
    let mut w = g.writer().unwrap();
    for i in 0..10 {
        assert!(w.write(&pkt(&payload(i)), &[(id, 0)]).is_some());
    }
    assert_eq!(r.available(), 4);
    let got: Vec<_> = r.iter().map(|p| check(&p.data, 256).unwrap()).collect();
    assert_eq!(got, vec![6, 7, 8, 9]);
    assert_eq!(r.stats().overwritten, 6);
}

#[test]
fn next_batch_and_iterators_release() {
    let g = Group::new(4, 256, Preference::SlowReader);
    let (id, mut r) = g.add_reader(4);
    let mut w = g.writer().unwrap();
    for i in 0..4 {
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
    }
    assert!(w.write(&pkt(&payload(4)), &[(id, 0)]).is_none());
    let mut out = Vec::new();
    assert_eq!(r.next_batch(3, &mut out), 3);
    assert_eq!(out[2].data, payload(2));
    // Released: three slots are free again.
    for i in 5..8 {
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
    }
    let got: Vec<_> = r.iter().map(|p| check(&p.data, 256).unwrap()).collect();
    assert_eq!(got, vec![3, 5, 6, 7]);
    w.write(&pkt(&payload(8)), &[(id, 0)]).unwrap();
    drop(w);
    let got: Vec<_> = r
        .blocking_iter()
        .map(|p| check(&p.data, 256).unwrap())
        .collect();
    assert_eq!(got, vec![8]);
    assert!(r.is_finished());
    assert_eq!(r.stats().delivered + r.stats().dropped, 9);
}

/// The slow-reader check of a whole batch: every slot read and not released still holds
/// the packet that was read.
fn assert_held(r: &Reader, batch: &[(SlotRef, u64)]) {
    for &(slot, seq) in batch {
        let words = r.shared.header(slot.index());
        assert_eq!(
            words[0].load(Ordering::Acquire),
            slot.seq() + 1,
            "overwritten"
        );
        let (len, ..) = decode_header(words, r.shared.max_len);
        assert_eq!(check(r.slot_bytes(slot.index(), len), 256), Some(seq));
    }
}

fn srp_threaded(k: u64) {
    let g = Group::new(32, 256, Preference::SlowReader);
    let (id, mut r) = g.add_reader(32);
    let mut w = g.writer().unwrap();
    // Before the reader runs: 32 fit, the rest is dropped (deterministic).
    for i in 0..100 {
        w.write(&pkt(&payload(i)), &[(id, i as u32)]);
    }
    let reader = thread::spawn(move || {
        let mut seen = Vec::new();
        let mut batch = Vec::new();
        loop {
            while batch.len() < 16 {
                let Some(d) = r.next() else { break };
                let seq = check(d.data, 256).expect("torn packet under SRP");
                assert_eq!(d.result, seq as u32);
                batch.push((d.slot, seq));
                dawdle(300);
            }
            assert_held(&r, &batch);
            seen.extend(batch.drain(..).map(|(_, s)| s));
            r.release();
            if r.is_finished() {
                break;
            }
            if r.available() == 0 {
                r.wait_for(1, Duration::from_secs(60));
            }
        }
        (seen, r)
    });
    for i in 100..k {
        w.write(&pkt(&payload(i)), &[(id, i as u32)]);
    }
    drop(w);
    let (seen, r) = reader.join().unwrap();
    assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
    let st = r.stats();
    assert_eq!(st.delivered, seen.len() as u64);
    assert_eq!(st.delivered + st.dropped, k);
    assert!(st.dropped >= 68);
    assert_eq!(g.stats().dropped + g.stats().copies, k);
    assert_eq!(st.overwritten, 0);
}

#[test]
fn srp_slow_reader_thread() {
    srp_threaded(20_000);
}

fn frp_threaded(k: u64) {
    // A PBuf as large as the run: only the slow reader's small IBuf overflows.
    let g = Group::new(k as u32, 256, Preference::FastReader);
    let (fast, mut rf) = g.add_reader(k as usize);
    let (slow, mut rs) = g.add_reader(16);
    let mut w = g.writer().unwrap();
    let to = [(fast, 1), (slow, 2)];
    for i in 0..64 {
        w.write(&pkt(&payload(i)), &to).unwrap();
    }
    let fast_t = thread::spawn(move || {
        let mut next = 0;
        while !rf.is_finished() {
            while let Some(d) = rf.next() {
                assert_eq!(check(d.data, 256), Some(next));
                next += 1;
            }
            rf.release();
            rf.wait_for(64, Duration::from_secs(60));
        }
        (next, rf)
    });
    let slow_t = thread::spawn(move || {
        let mut seen = Vec::new();
        while !rs.is_finished() {
            while let Some(d) = rs.next() {
                seen.push(check(d.data, 256).expect("torn packet returned"));
                dawdle(2_000);
            }
            rs.release();
            rs.wait_for(1, Duration::from_secs(60));
        }
        (seen, rs)
    });
    for i in 64..k {
        // The writer never waits and never drops.
        let s = w.write_packet(&pkt(&payload(i))).unwrap();
        assert!(w.deliver(fast, s, 1));
        assert!(w.deliver(slow, s, 2));
    }
    drop(w);
    let (n, rf) = fast_t.join().unwrap();
    let (seen, rs) = slow_t.join().unwrap();
    assert_eq!(n, k);
    let f = rf.stats();
    assert_eq!((f.delivered, f.overwritten, f.dropped), (k, 0, 0));
    assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
    let s = rs.stats();
    assert_eq!(s.delivered, seen.len() as u64);
    assert_eq!(s.delivered + s.overwritten, k);
    assert!(s.overwritten >= 48);
    assert_eq!(s.dropped, 0);
}

#[test]
fn frp_fast_and_slow_reader_threads() {
    frp_threaded(20_000);
}

fn frp_torn(k: u64) {
    // Four slots: the writer laps the reader constantly, often mid-copy.
    frp_torn_on(Group::new(4, 256, Preference::FastReader), k);
}

fn frp_torn_on(g: Group, k: u64) {
    let (id, mut r) = g.add_reader(k as usize);
    let mut w = g.writer().unwrap();
    for i in 0..16 {
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
    }
    let ib = Arc::clone(&r.ibuf);
    let t = thread::spawn(move || {
        let mut seen = Vec::new();
        let mut lost = 0;
        while !r.is_finished() {
            while let Some(d) = r.next() {
                let seq = check(d.data, 256).expect("torn packet returned");
                assert_eq!(d.wire_len as usize, len_of(seq));
                assert_eq!(d.timestamp.secs() as usize, len_of(seq));
                lost += d.lost_before;
                seen.push(seq);
            }
            r.release();
        }
        (seen, lost, r)
    });
    for i in 16..k {
        // Test pacing, not the buffer's: stay a few packets ahead of the reader, so that
        // the slot it copies is often the one being rewritten.
        while i > ib.reader.delivered.load(Ordering::Relaxed)
            + ib.reader.overwritten.load(Ordering::Relaxed)
            + 5
        {
            thread::yield_now();
        }
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
    }
    drop(w);
    let (seen, lost, r) = t.join().unwrap();
    assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
    let s = r.stats();
    assert_eq!(s.delivered, seen.len() as u64);
    assert_eq!(s.delivered + s.overwritten, k);
    assert_eq!(
        lost + k - 1 - seen.last().copied().unwrap_or(0),
        s.overwritten
    );
    assert!(s.overwritten >= 12);
    eprintln!(
        "{} overwritten, {} of them detected after the copy (all tests so far)",
        s.overwritten,
        TORN.load(Ordering::Relaxed)
    );
}

#[test]
fn frp_overwrite_during_read_is_detected() {
    frp_torn(20_000);
}

#[test]
fn frp_overwrite_of_spanning_packets_is_detected() {
    // 16 slots of 32 bytes: packets of 16 ..= 215 bytes take 1 to 7 slots, the writer laps
    // the reader constantly and overwrites the middle of packets being copied.
    let g = Group::create(16, 32, 256, Preference::FastReader, false).unwrap();
    assert_eq!(g.max_len(), 256);
    frp_torn_on(g, 20_000);
}

#[test]
fn srp_spanning_packets_with_a_reader_thread() {
    let k = 20_000u64;
    let g = Group::create(32, 32, 256, Preference::SlowReader, false).unwrap();
    let (id, mut r) = g.add_reader(32);
    let mut w = g.writer().unwrap();
    let t = thread::spawn(move || {
        let mut seen = Vec::new();
        while !r.is_finished() {
            while let Some(d) = r.next() {
                // Borrowed in place: the writer must not touch any of its slots now.
                let seq = check(d.data, usize::MAX).expect("a held packet was overwritten");
                seen.push(seq);
                if seq % 5 == 0 {
                    dawdle(500);
                }
            }
            r.release();
            r.wait_for(1, Duration::from_secs(60));
        }
        (seen, r)
    });
    for i in 0..k {
        w.write(&pkt(&payload(i)), &[(id, 0)]);
    }
    drop(w);
    let (seen, r) = t.join().unwrap();
    assert!(seen.windows(2).all(|p| p[0] < p[1]), "out of order");
    let st = r.stats();
    assert_eq!(st.delivered, seen.len() as u64);
    assert_eq!(st.delivered + st.dropped, k);
    assert!(st.delivered > 0);
}

#[test]
fn spanning_packets_are_stored_whole() {
    for shared in [false, true] {
        // 64 slots of 32 bytes (max_len 256, half the ring); readers in batches.
        let g = Group::create(64, 32, 1000, Preference::SlowReader, shared).unwrap();
        assert_eq!(g.max_len(), 1000);
        let capped = Group::create(64, 32, 5000, Preference::SlowReader, false).unwrap();
        assert_eq!(capped.max_len(), 1024, "at most half the ring");
        let (id, r) = g.try_add_reader(64).unwrap();
        let mut r = if shared { attach_like_a_client(&r) } else { r };
        let mut w = g.writer().unwrap();
        let (mut got, mut written) = (Vec::new(), 0u64);
        for i in 0..3000u64 {
            if w.write(&pkt(&payload(i)), &[(id, i as u32)]).is_some() {
                written += 1;
            }
            if i % 7 == 6 {
                while let Some(d) = r.next() {
                    let seq = check(d.data, usize::MAX).expect("intact");
                    assert_eq!(d.result as u64, seq);
                    assert_eq!(d.wire_len as usize, len_of(seq));
                    got.push(seq);
                }
                r.release();
            }
        }
        while let Some(d) = r.next() {
            got.push(check(d.data, usize::MAX).expect("intact"));
        }
        r.release();
        let st = g.reader_stats(id).unwrap();
        assert_eq!(st.delivered + st.dropped, 3000, "{st:?}");
        assert_eq!(got.len() as u64, written);
        assert!(got.windows(2).all(|p| p[0] < p[1]));
        assert!(
            written > 2000,
            "{written}: dense slots hold ~10 packets of ~120 bytes"
        );
        // Longer than max_len: cut.
        let long = vec![7u8; 5000];
        w.write(&pkt(&long), &[(id, 0)]).unwrap();
        assert_eq!(r.next().unwrap().data.len(), 1000);
    }
}

#[test]
fn readers_added_and_removed_mid_stream() {
    let g = Group::new(8, 256, Preference::SlowReader);
    let (a, mut ra) = g.add_reader(64);
    let mut w = g.writer().unwrap();
    for i in 0..4 {
        w.write(&pkt(&payload(i)), &[(a, 0)]).unwrap();
    }
    let (b, mut rb) = g.add_reader(64);
    for i in 4..8 {
        w.write(&pkt(&payload(i)), &[(a, 0), (b, 0)]).unwrap();
    }
    let got_b: Vec<_> = rb.iter().map(|p| check(&p.data, 256).unwrap()).collect();
    assert_eq!(got_b, vec![4, 5, 6, 7]);
    // A has not released anything: the PBuf is full because of A alone.
    assert!(w.write(&pkt(&payload(8)), &[(b, 0)]).is_none());
    assert_eq!(ra.next().map(|d| check(d.data, 256)), Some(Some(0)));
    // Removing A releases its hold.
    drop(ra);
    assert!(w.write(&pkt(&payload(9)), &[(a, 0), (b, 0)]).is_some());
    assert_eq!(rb.stats().appended, 5);
    // A's index is reused with a new serial; the stale id is refused.
    let (c, mut rc) = g.add_reader(64);
    assert_eq!(c.index(), a.index());
    assert_ne!(c, a);
    let s = w.write_packet(&pkt(&payload(10))).unwrap();
    assert!(!w.deliver(a, s, 0));
    assert!(w.deliver(c, s, 0));
    assert_eq!(rc.next().map(|d| check(d.data, 256)), Some(Some(10)));
    assert_eq!(rc.stats().appended, 1);
}

fn churn_threaded(k: u64) {
    let g = Group::new(256, 256, Preference::SlowReader);
    let (a, ra) = g.add_reader(256);
    let mut w = g.writer().unwrap();
    let g2 = g.clone();
    let writer = thread::spawn(move || {
        let mut to = Vec::new();
        for i in 0..k {
            if i % 16 == 0 {
                to = g2.readers().into_iter().map(|id| (id, 0)).collect();
            }
            w.write(&pkt(&payload(i)), &to);
        }
    });
    let reader_a = thread::spawn(move || {
        let mut ra = ra;
        let seen: Vec<_> = ra
            .blocking_iter()
            .map(|p| check(&p.data, 256).unwrap())
            .collect();
        (seen, ra)
    });
    // Readers come and go while the writer and reader A run.
    for round in 0..20 {
        let (_, mut r) = g.add_reader(64);
        let mut seen = Vec::new();
        while seen.len() < 20 && !r.is_finished() {
            seen.extend(r.iter().map(|p| check(&p.data, 256).unwrap()));
            thread::yield_now();
        }
        assert!(seen.windows(2).all(|p| p[0] < p[1]), "round {round}");
        seen.extend(r.iter().map(|p| check(&p.data, 256).unwrap()));
        let st = r.stats();
        assert_eq!(st.delivered, seen.len() as u64);
        // The writer may have appended more since the last drain.
        assert!(st.appended >= st.delivered);
    }
    writer.join().unwrap();
    let (seen, ra) = reader_a.join().unwrap();
    assert!(seen.windows(2).all(|p| p[0] < p[1]));
    let st = ra.stats();
    assert_eq!(st.delivered + st.dropped, k);
    assert_eq!(g.reader_stats(a), Some(st));
}

#[test]
fn readers_churn_while_writer_runs() {
    churn_threaded(20_000);
}

#[test]
fn wait_for_wakes_times_out_and_ends() {
    let g = Group::new(16, 64, Preference::SlowReader);
    let (id, mut r) = g.add_reader(16);
    let mut w = g.writer().unwrap();
    let t0 = Instant::now();
    assert_eq!(r.wait_for(1, Duration::from_millis(10)), 0);
    assert!(t0.elapsed() >= Duration::from_millis(10));
    let t = thread::spawn(move || {
        let n = r.wait_for(5, Duration::from_secs(600));
        (n, r)
    });
    for i in 0..5 {
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
        thread::yield_now();
    }
    let (n, mut r) = t.join().unwrap();
    assert!(n >= 5);
    // A finished writer ends every wait.
    drop(w);
    assert_eq!(r.wait_for(10, Duration::from_secs(600)), 5);
    assert!(!r.is_finished());
    r.iter().for_each(drop);
    assert!(r.is_finished());
}

#[test]
fn callbacks_every_n_packets_and_every_t() {
    // Every 10 packets; the rest when the writer finishes.
    let g = Group::new(64, 64, Preference::SlowReader);
    let (id, r) = g.add_reader(64);
    let mut w = g.writer().unwrap();
    for i in 0..25 {
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
    }
    drop(w);
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&sizes);
    let cb = r.on_every(10, Duration::from_secs(3600), move |b| {
        lock(&s2).push(b.len());
    });
    let r = cb.join();
    assert_eq!(*lock(&sizes), vec![10, 10, 5]);
    assert_eq!(r.stats().delivered, 25);

    // Every 20 ms with what arrived.
    let g = Group::new(64, 64, Preference::FastReader);
    let (id, r) = g.add_reader(64);
    let mut w = g.writer().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let cb = r.on_every(10, Duration::from_millis(20), move |b| {
        let seqs: Vec<_> = b.iter().map(|p| check(&p.data, 64).unwrap()).collect();
        tx.send(seqs).unwrap();
    });
    for i in 0..3 {
        w.write(&pkt(&payload(i)), &[(id, 0)]).unwrap();
    }
    let got = rx.recv_timeout(Duration::from_secs(600)).unwrap();
    assert_eq!(got, vec![0, 1, 2]);
    let r = cb.stop();
    assert_eq!(r.stats().delivered, 3);
    drop(w);
}
