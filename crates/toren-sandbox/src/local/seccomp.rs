//! The seccomp filter bubblewrap installs for every command (`--seccomp FD`): it refuses the
//! kernel keyring calls (`add_key`, `request_key`, `keyctl`), through which a command could
//! otherwise read keys of the user running Toren, and system calls of any other ABI than the
//! native one (x32, 32-bit), through which the filter could be sidestepped. Everything else
//! is allowed. The program is built here as classic BPF; `exec` hands it to bubblewrap
//! through a pipe.

use std::io::{self, Write};

/// `seccomp_data.nr` and `seccomp_data.arch` offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const EPERM: u32 = 1;

#[cfg(target_arch = "x86_64")]
mod native {
    pub(super) const AUDIT_ARCH: u32 = 0xc000_003e;
    /// x32 system calls carry this bit; refused wholesale.
    pub(super) const FOREIGN_FROM: Option<u32> = Some(0x4000_0000);
    /// `add_key`, `request_key`, `keyctl`.
    pub(super) const KEYRING_CALLS: [u32; 3] = [248, 249, 250];
}

#[cfg(target_arch = "aarch64")]
mod native {
    pub(super) const AUDIT_ARCH: u32 = 0xc000_00b7;
    pub(super) const FOREIGN_FROM: Option<u32> = None;
    pub(super) const KEYRING_CALLS: [u32; 3] = [217, 218, 219];
}

/// Whether this build has a filter for its architecture.
pub(crate) const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// One `struct sock_filter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// The filter program, as the bytes of a `struct sock_filter` array.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn program() -> Vec<u8> {
    encode(&build(
        native::AUDIT_ARCH,
        native::FOREIGN_FROM,
        &native::KEYRING_CALLS,
    ))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) fn program() -> Vec<u8> {
    Vec::new()
}

/// Load the architecture, refuse foreign ones; load the call number, refuse foreign ABIs and
/// the `denied` calls; allow the rest.
fn build(arch: u32, foreign_from: Option<u32>, denied: &[u32]) -> Vec<Insn> {
    let mut checks: Vec<(u16, u32)> = Vec::new();
    if let Some(bit) = foreign_from {
        checks.push((JGE_K, bit));
    }
    checks.extend(denied.iter().map(|nr| (JEQ_K, *nr)));
    // Layout: [0] ld arch, [1] jeq arch, [2] ld nr, checks…, allow, deny.
    let deny_at = 3 + checks.len() + 1;
    let jump = |from: usize| u8::try_from(deny_at - from - 1).unwrap_or(u8::MAX);
    let mut insns = vec![
        Insn {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: ARCH,
        },
        Insn {
            code: JEQ_K,
            jt: 0,
            jf: jump(1),
            k: arch,
        },
        Insn {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: NR,
        },
    ];
    for (i, (code, k)) in checks.into_iter().enumerate() {
        let at = 3 + i;
        insns.push(Insn {
            code,
            jt: jump(at),
            jf: 0,
            k,
        });
    }
    insns.push(Insn {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: RET_ALLOW,
    });
    insns.push(Insn {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: RET_ERRNO | EPERM,
    });
    insns
}

fn encode(insns: &[Insn]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(insns.len() * 8);
    for insn in insns {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    bytes
}

/// A pipe holding the program, its write end already closed: bubblewrap reads the read end
/// to its end. The read end is close-on-exec; the pre-exec hook clears that for it alone.
pub(crate) fn pipe() -> io::Result<io::PipeReader> {
    let (reader, mut writer) = io::pipe()?;
    writer.write_all(&program())?;
    drop(writer);
    Ok(reader)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on one (arch, nr) pair, like the kernel would.
    fn verdict(insns: &[Insn], arch: u32, nr: u32) -> u32 {
        let mut acc = 0;
        let mut pc = 0;
        loop {
            let insn = insns[pc];
            pc += 1;
            match insn.code {
                LD_W_ABS => acc = if insn.k == ARCH { arch } else { nr },
                JEQ_K | JGE_K => {
                    let hit = if insn.code == JEQ_K {
                        acc == insn.k
                    } else {
                        acc >= insn.k
                    };
                    pc += usize::from(if hit { insn.jt } else { insn.jf });
                }
                RET_K => return insn.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn keyring_calls_and_foreign_abis_are_refused_and_the_rest_allowed() {
        let insns = build(0xc000_003e, Some(0x4000_0000), &[248, 249, 250]);
        let deny = RET_ERRNO | EPERM;
        for nr in [248, 249, 250, 0x4000_0000 + 250, 0x4000_0000] {
            assert_eq!(verdict(&insns, 0xc000_003e, nr), deny, "{nr}");
        }
        for nr in [0, 1, 59, 247, 251, 435] {
            assert_eq!(verdict(&insns, 0xc000_003e, nr), RET_ALLOW, "{nr}");
        }
        assert_eq!(verdict(&insns, 0x4000_0003, 1), deny, "i386");

        let insns = build(0xc000_00b7, None, &[217, 218, 219]);
        assert_eq!(verdict(&insns, 0xc000_00b7, 219), deny);
        assert_eq!(verdict(&insns, 0xc000_00b7, 220), RET_ALLOW);
        assert_eq!(encode(&insns).len(), insns.len() * 8);
    }
}
