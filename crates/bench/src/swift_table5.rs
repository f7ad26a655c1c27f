//! The Swift paper's Table 5 filters written with Swift's builder, as the paper's authors wrote
//! them with ooswift: SIMD operands and power instructions; and the ablated forms of Table 7
//! (one operand per instruction; passes without hierarchical execution).

use netsift_swift::build::{self, FilterSpec};
use netsift_swift::{Inst, Mode, Op};

use crate::handwritten::HOSTS;

/// How the filter is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// SIMD operands and power instructions.
    Full,
    /// One operand per instruction: sets become several passes (ORed) or instructions (ANDed).
    NoSimd,
}

/// The filter `n` (1 to 6) of Table 5.
pub fn filter(n: usize, form: Form) -> FilterSpec {
    let mut f = FilterSpec::new();
    let ip = build::ether_type(&[0x800]);
    match n {
        1 => {}
        2 => {
            f.pass(vec![ip]);
        }
        3 => {
            f.pass(vec![
                ip,
                build::ip4_net_both(0xc0a8_0200, 0xffff_ff00, 0x0a00_0000, 0xff00_0000),
            ]);
        }
        4 => {
            f.pass(vec![ip, build::ip4_net_either(0xc0a8_0200, 0xffff_ff00)]);
        }
        5 => {
            let ports = [22u16, 80, 143, 25, 110, 21];
            match form {
                Form::Full => {
                    f.pass(vec![build::ip4_proto_ports(6, &ports)]);
                }
                Form::NoSimd => {
                    let first = f.pass(vec![ip, build::ip4_proto_ports(6, &ports[..1])]);
                    for p in &ports[1..] {
                        f.child(first, vec![ip, build::ip4_proto_ports(6, &[*p])]);
                    }
                }
            }
        }
        _ => {
            let mut pass = vec![ip];
            match form {
                Form::Full => {
                    pass.push(build::not(build::ip4_proto_ports(6, &[80, 25, 143])));
                    pass.extend(build::ip4_host_either(&HOSTS).into_iter().map(build::not));
                }
                Form::NoSimd => {
                    for p in [80u16, 25, 143] {
                        pass.push(build::not(build::ip4_proto_ports(6, &[p])));
                    }
                    for h in HOSTS {
                        let mut i = Inst::new(Op::HostEither, Mode::D, 26);
                        let _ = i.add_value(h);
                        pass.push(build::not(i));
                    }
                }
            }
            f.pass(pass);
        }
    }
    f
}
