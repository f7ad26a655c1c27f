//! Every entry point compiles a filter the same way: for every expression of libpcap's
//! `accept.tsv` and every link type it is listed for, `netsift compile` (the command line's
//! path, shared by `filter` and `capture`), the graph's `bpf` class and the libpcap-compatible
//! library's `pcap_compile` give byte-identical programs at optimisation levels 0 and 1 for
//! the same target; and the library's level-0 program is libpcap 1.10.3's unoptimised meaning:
//! the same verdict as libpcap's `-O0` program on every packet of every shared capture of that
//! link type.
//!
//! The library is loaded with `dlopen` (`RTLD_LOCAL | RTLD_DEEPBIND`), beside the real libpcap
//! the oracle links, so that each answers for itself.

use std::ffi::{CStr, CString, OsStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

use netsift::bpf::{Filter as Interp, Insn, Program, Rules, asm};
use netsift::{Target, capture::LinkType};
use netsift_graph::class::{Arg, Context, Instance};
use netsift_testkit::{corpus, data, oracle};

const BIN: &str = env!("CARGO_BIN_EXE_netsift");
const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

#[repr(C)]
struct BpfProgram {
    bf_len: u32,
    bf_insns: *mut Insn,
}

type OpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type Compile =
    unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
type GetErr = unsafe extern "C" fn(*mut c_void) -> *mut c_char;
type FreeCode = unsafe extern "C" fn(*mut BpfProgram);
type Close = unsafe extern "C" fn(*mut c_void);
type OpenOffline = unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_void;

/// netsift's libpcap, loaded on its own.
struct Shim {
    open_dead: OpenDead,
    compile: Compile,
    geterr: GetErr,
    freecode: FreeCode,
    close: Close,
    open_offline: OpenOffline,
}

impl Shim {
    fn load() -> Shim {
        let dir = netsift_testkit::build::release(&["netsift-pcap"]);
        let path = CString::new(dir.join("libpcap.so").to_str().unwrap()).unwrap();
        // SAFETY: dlopen of a library this workspace built; its constructors are Rust's.
        let h = unsafe {
            libc::dlopen(
                path.as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_DEEPBIND,
            )
        };
        assert!(!h.is_null(), "cannot load {path:?}");
        let sym = |name: &str| {
            let c = CString::new(name).unwrap();
            // SAFETY: a symbol lookup in the handle just opened (never closed).
            let p = unsafe { libc::dlsym(h, c.as_ptr()) };
            assert!(!p.is_null(), "netsift's libpcap has no {name}");
            p
        };
        // SAFETY: the symbols are the library's functions with libpcap's signatures.
        unsafe {
            Shim {
                open_dead: std::mem::transmute::<*mut c_void, OpenDead>(sym("pcap_open_dead")),
                compile: std::mem::transmute::<*mut c_void, Compile>(sym("pcap_compile")),
                geterr: std::mem::transmute::<*mut c_void, GetErr>(sym("pcap_geterr")),
                freecode: std::mem::transmute::<*mut c_void, FreeCode>(sym("pcap_freecode")),
                close: std::mem::transmute::<*mut c_void, Close>(sym("pcap_close")),
                open_offline: std::mem::transmute::<*mut c_void, OpenOffline>(sym(
                    "pcap_open_offline",
                )),
            }
        }
    }

    /// `pcap_compile` on `pcap_open_dead(dlt, snaplen)`, or its error text.
    fn program(
        &self,
        dlt: i32,
        snaplen: u32,
        expr: &str,
        optimize: bool,
    ) -> Result<Program, String> {
        // SAFETY: a handle of our own, closed by `compile_on`.
        let p = unsafe { (self.open_dead)(dlt, snaplen as c_int) };
        assert!(!p.is_null());
        self.compile_on(p, expr, optimize)
    }

    /// `pcap_compile` on `pcap_open_offline(path)`, or its error text.
    fn program_for_file(&self, path: &Path, expr: &str, optimize: bool) -> Result<Program, String> {
        let c = CString::new(path.to_str().unwrap()).unwrap();
        let mut errbuf = [0 as c_char; 256];
        // SAFETY: a path and libpcap's error buffer size; the handle is closed by `compile_on`.
        let p = unsafe { (self.open_offline)(c.as_ptr(), errbuf.as_mut_ptr()) };
        assert!(!p.is_null(), "pcap_open_offline({path:?}) failed");
        self.compile_on(p, expr, optimize)
    }

    /// `pcap_compile` on the handle `p` (closed before returning), or its error text.
    fn compile_on(&self, p: *mut c_void, expr: &str, optimize: bool) -> Result<Program, String> {
        let c = CString::new(expr).unwrap();
        // SAFETY: libpcap's API on a handle of our own; the instructions are copied before
        // pcap_freecode.
        unsafe {
            let mut prog = BpfProgram {
                bf_len: 0,
                bf_insns: std::ptr::null_mut(),
            };
            let rc = (self.compile)(
                p,
                &mut prog,
                c.as_ptr(),
                c_int::from(optimize),
                PCAP_NETMASK_UNKNOWN,
            );
            let r = if rc == 0 {
                let insns =
                    std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize).to_vec();
                (self.freecode)(&mut prog);
                Ok(Program::new(insns))
            } else {
                Err(CStr::from_ptr((self.geterr)(p))
                    .to_string_lossy()
                    .into_owned())
            };
            (self.close)(p);
            r
        }
    }
}

/// `netsift compile -ddd` for the link type, snap length and level.
fn cli(name: &str, snaplen: u32, expr: &str, optimize: bool) -> Result<Program, String> {
    let snaplen = snaplen.to_string();
    compile_ddd(
        &["--linktype", name, "--snaplen", &snaplen].map(OsStr::new),
        expr,
        optimize,
    )
}

/// `netsift compile -ddd -r FILE` at the level.
fn cli_for_file(path: &Path, expr: &str, optimize: bool) -> Result<Program, String> {
    compile_ddd(&[OsStr::new("-r"), path.as_os_str()], expr, optimize)
}

/// `netsift compile -ddd TARGET… -O0|-O1 -- EXPR`, its program read back.
fn compile_ddd(target: &[&OsStr], expr: &str, optimize: bool) -> Result<Program, String> {
    let o = Command::new(BIN)
        .args(["compile", "-ddd"])
        .args(target)
        .arg(if optimize { "-O1" } else { "-O0" })
        .args(["--", expr])
        .output()
        .expect("run netsift");
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    asm::parse_any(&String::from_utf8_lossy(&o.stdout)).map_err(|e| e.to_string())
}

/// The target the graph's `(file, PATH)` source gives the filters after it.
fn file_source_target(path: &Path) -> Target {
    let reg = netsift_graph::standard_registry();
    let arg = Arg {
        text: path.to_str().unwrap().to_string(),
        quoted: true,
    };
    match reg
        .get("file")
        .expect("the file class")
        .instantiate(&[arg], &Context::default())
    {
        Ok(Instance::Source(s)) => s.target(),
        _ => panic!("(file,{path:?}) is not a source"),
    }
}

/// The program of the graph's `bpf` class for `target`.
fn graph(target: Target, expr: &str) -> Result<Program, String> {
    let reg = netsift_graph::standard_registry();
    let class = reg.get("bpf").expect("the bpf class");
    let ctx = Context {
        target: Some(target),
        mbuf_bytes: 0,
        access: Default::default(),
        bounds: Default::default(),
    };
    let arg = Arg {
        text: expr.to_string(),
        quoted: true,
    };
    match class.instantiate(&[arg], &ctx).map_err(|e| e.to_string())? {
        Instance::Filter(f) => Ok(f.program().expect("bpf runs a program").clone()),
        Instance::Source(_) => Err("a source".into()),
    }
}

/// The distinct (link type, snap length, expression) of `accept.tsv` for the link types netsift
/// compiles for.
fn accepted() -> Vec<corpus::Case> {
    let mut v: Vec<corpus::Case> = data::libpcap_table("accept.tsv")
        .iter()
        .filter(|r| {
            corpus::LINK_TYPES.contains(&r.get("dlt"))
                && !r.get("label").starts_with("accept_bpf_image")
        })
        .map(|r| corpus::Case {
            dlt: r.get("dlt").to_string(),
            snaplen: r.get("snaplen").parse().unwrap_or(262_144),
            expr: r.get("expr").to_string(),
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn every_entry_point_compiles_alike_and_level_0_is_libpcaps_meaning() {
    let shim = Shim::load();
    let by_dlt = corpus::packets_by_dlt();
    let cases = accepted();
    assert!(
        cases.len() > 600,
        "only {} cases in accept.tsv",
        cases.len()
    );
    let (mut programs, mut packets, mut rejected) = (0u64, 0u64, 0u64);
    for c in &cases {
        let dlt = oracle::dlt_from_name(&c.dlt).unwrap();
        let lt: LinkType = corpus::link_type(&c.dlt);
        for optimize in [false, true] {
            let target = Target::live(lt, c.snaplen).with_optimize(optimize);
            let what = format!("[{}] {:?} -O{}", c.dlt, c.expr, u8::from(optimize));
            let from_cli = cli(&c.dlt.to_lowercase(), c.snaplen, &c.expr, optimize);
            let from_graph = graph(target, &c.expr);
            let from_shim = shim.program(dlt, c.snaplen, &c.expr, optimize);
            let show = |p: &Result<Program, String>| -> Result<String, ()> {
                p.as_ref()
                    .map(|p| asm::dump(p, asm::Format::Asm))
                    .map_err(|_| ())
            };
            match (show(&from_cli), show(&from_graph), show(&from_shim)) {
                (Ok(a), Ok(b), Ok(c)) => {
                    assert_eq!(a, b, "{what}: the command line and the graph differ");
                    assert_eq!(a, c, "{what}: the command line and pcap_compile differ");
                    programs += 3;
                }
                (Err(_), Err(_), Err(_)) => rejected += 1,
                (a, b, c) => panic!(
                    "{what}: the entry points disagree: command line {:?}, graph {:?}, \
                     pcap_compile {:?}",
                    a.map(|_| "compiles"),
                    b.map(|_| "compiles"),
                    c.map(|_| "compiles")
                ),
            }
            if optimize {
                continue;
            }
            // Level 0 is libpcap's unoptimised meaning on every packet of this link type
            // (accept.tsv is libpcap master's: 1.10.3 rejects a few of its expressions, and so
            // does netsift).
            let theirs = oracle::compile(dlt, c.snaplen as i32, &c.expr, false);
            let (ours, theirs) = match (from_shim, theirs) {
                (Ok(o), Ok(t)) => (o, t),
                (Err(_), Err(_)) => continue,
                (o, t) => panic!(
                    "{what}: pcap_compile {:?}, libpcap 1.10.3 {:?}",
                    o.map(|_| "compiles"),
                    t.map(|_| "compiles")
                ),
            };
            let ours = Interp::new(ours, Rules::Libpcap).unwrap();
            for (i, (p, l)) in corpus::packets_of(&by_dlt, dlt).iter().enumerate() {
                let (a, b) = (ours.run(p, *l), oracle::filter(&theirs, p, *l).unwrap());
                assert_eq!(
                    a, b,
                    "{what}: packet {i}: pcap_compile's program {a}, libpcap's {b}"
                );
                packets += 1;
            }
        }
    }
    assert!(programs > 3000, "only {programs} programs compared");
    println!(
        "{} expressions x levels 0 and 1: {programs} programs alike; {packets} level-0 verdicts \
         equal to libpcap 1.10.3's; {rejected} compilations rejected by every entry point",
        cases.len()
    );
}

/// A capture file of `link` whose header says `snaplen`, with one packet.
fn capture(name: &str, link: LinkType, snaplen: u32) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netsift-entry-points-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let mut w = netsift_capture::PcapWriter::new(
        std::fs::File::create(&path).unwrap(),
        link,
        snaplen,
        netsift_capture::Precision::Micro,
    )
    .unwrap();
    let data = [0x45u8; 60];
    w.write_packet(&netsift_capture::PacketRef {
        data: &data,
        wire_len: 60,
        timestamp: netsift_capture::Timestamp::from_nanos(0),
        link_type: link,
        interface: 0,
    })
    .unwrap();
    w.flush().unwrap();
    path
}

/// Capture files too: `netsift compile -r FILE`, the graph's `bpf` class after a `(file,FILE)`
/// source and `pcap_compile` on `pcap_open_offline(FILE)` compile alike — the file's link type,
/// its snap length as libpcap reads it (0, 300000, above `INT_MAX`), its byte order (libpcap's
/// savefile meanings) — for every `accept.tsv` expression of the file's link type.
#[test]
fn capture_files_compile_alike_through_every_entry_point() {
    let shim = Shim::load();
    let cases = accepted();
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for name in corpus::LINK_TYPES {
        let lt = corpus::link_type(name);
        for snap in [0, 65_535, 300_000, 1 << 31] {
            files.push((
                capture(&format!("{name}-{snap}.pcap"), lt, snap),
                name.to_string(),
            ));
        }
    }
    // Real captures of other byte orders (NULL's family field is read in the file's order).
    for path in data::tcpdump_captures() {
        if let Ok(r) = netsift_capture::CaptureReader::open(&path)
            && let Some(lt) = r.link_type()
            && let Some(name) = corpus::LINK_TYPES
                .iter()
                .find(|n| corpus::link_type(n) == lt)
            && files.iter().filter(|(_, n)| n == name).count() < 6
        {
            files.push((path.clone(), name.to_string()));
        }
    }
    let mut programs = 0u64;
    for (path, name) in &files {
        let target = file_source_target(path);
        for c in cases.iter().filter(|c| &c.dlt == name).take(60) {
            for optimize in [false, true] {
                let what = format!("{} {:?} -O{}", path.display(), c.expr, u8::from(optimize));
                let show = |p: Result<Program, String>| p.map(|p| asm::dump(&p, asm::Format::Asm));
                let a = show(cli_for_file(path, &c.expr, optimize));
                let b = show(graph(target.with_optimize(optimize), &c.expr));
                let p = show(shim.program_for_file(path, &c.expr, optimize));
                match (a, b, p) {
                    (Ok(a), Ok(b), Ok(p)) => {
                        assert_eq!(a, b, "{what}: the command line and the graph differ");
                        assert_eq!(a, p, "{what}: the command line and pcap_compile differ");
                        programs += 3;
                    }
                    (Err(_), Err(_), Err(_)) => {}
                    (a, b, p) => panic!(
                        "{what}: command line {:?}, graph {:?}, pcap_compile {:?}",
                        a.map(|_| "compiles"),
                        b.map(|_| "compiles"),
                        p.map(|_| "compiles")
                    ),
                }
            }
        }
    }
    assert!(programs > 3000, "only {programs} programs compared");
    println!("{} capture files: {programs} programs alike", files.len());
}
