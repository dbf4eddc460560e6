//! A seccomp filter for what Landlock does not cover: sockets and the
//! system calls only a privileged process could misuse.
//!
//! - **Sockets.** Landlock (ABI ≤ 7) governs abstract UNIX sockets but not
//!   pathname ones: without this filter a sandboxed process could
//!   `connect()` to a Docker or D-Bus socket outside its directory. No
//!   `AF_UNIX` socket can be made at all (a connected stream or seqpacket
//!   `socketpair`, which reaches nothing outside, still can: Rust's
//!   `Command` and Python's asyncio need one; a datagram pair could be
//!   pointed at any address, and cannot); with [`Network::None`] (a build) no socket of any
//!   family can be made, so an offline build is offline. `io_uring`, which
//!   opens and connects sockets without these system calls, is refused.
//! - **Privileged calls.** Run as root (a container, a CI machine), a
//!   process holds capabilities Landlock does not take away: loading
//!   kernel modules, opening files by handle (which bypasses path-based
//!   rules), mounting, the kernel keyrings (where the user's secrets may
//!   be), switching namespaces. None of them has a use in an agent or a
//!   build, so they fail with `EPERM` for everyone.
//!
//! A call of another architecture's ABI (x32, 32-bit x86) kills the
//! process: the numbers below would mean other calls there.

use super::Network;

/// `AUDIT_ARCH_*` of `include/uapi/linux/audit.h` for this build's target.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// x32 system calls are the x86_64 numbers with this bit set.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Offsets in `struct seccomp_data`: `nr`, `arch`, then six 64-bit
/// arguments (their low halves first on these little-endian targets).
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn argument(index: u32) -> u32 {
    16 + 8 * index
}

/// System calls refused outright (see the module's documentation).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn refused_calls() -> Vec<libc::c_long> {
    let mut calls = vec![
        libc::SYS_io_uring_setup,
        libc::SYS_open_by_handle_at,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_acct,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_adjtimex,
        libc::SYS_clock_adjtime,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_iopl, libc::SYS_ioperm]);
    calls
}

/// A compiled filter, built before `fork` so that installing it allocates
/// nothing.
pub struct Filter {
    program: Vec<libc::sock_filter>,
}

fn statement(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `if accumulator == k { skip jt } else { skip jf }`.
fn jump_if_equal(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

fn load(offset: u32) -> libc::sock_filter {
    statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset)
}

fn ret(action: u32) -> libc::sock_filter {
    statement(libc::BPF_RET | libc::BPF_K, action)
}

fn refuse(errno: i32) -> libc::sock_filter {
    ret(libc::SECCOMP_RET_ERRNO | errno as u32)
}

impl Filter {
    /// The filter for a sandbox with `network`; `None` on an architecture
    /// this module has no table for (the sandbox then refuses to start).
    pub fn new(network: Network) -> Option<Filter> {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            Some(Filter {
                program: program(network),
            })
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            let _ = network;
            None
        }
    }

    /// Installs the filter on the calling thread and everything it starts,
    /// for good (setting `PR_SET_NO_NEW_PRIVS`, without which an
    /// unprivileged process may not). Runs in a forked child: system calls
    /// only.
    pub fn install(&self) -> std::io::Result<()> {
        // SAFETY: a plain system call on integers.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let program = libc::sock_fprog {
            len: self.program.len() as u16,
            filter: self.program.as_ptr().cast_mut(),
        };
        // SAFETY: `program` points into `self.program`, alive for the call;
        // the kernel copies it.
        let done = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
                0,
                0,
            )
        };
        if done != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn program(network: Network) -> Vec<libc::sock_filter> {
    let allow = ret(libc::SECCOMP_RET_ALLOW);
    let mut program = vec![
        load(ARCH),
        jump_if_equal(AUDIT_ARCH, 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        load(NR),
    ];
    #[cfg(target_arch = "x86_64")]
    program.extend([
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        ret(libc::SECCOMP_RET_KILL_PROCESS),
    ]);
    for call in refused_calls() {
        let errno = if call == libc::SYS_io_uring_setup {
            libc::ENOSYS
        } else {
            libc::EPERM
        };
        program.extend([jump_if_equal(call as u32, 0, 1), refuse(errno)]);
    }
    // socket(domain, …): which domains, by the network the sandbox has.
    let socket_rules = match network {
        Network::None => vec![refuse(libc::EACCES)],
        Network::Internet => vec![
            load(argument(0)),
            jump_if_equal(libc::AF_UNIX as u32, 0, 1),
            refuse(libc::EACCES),
            allow,
        ],
    };
    program.push(jump_if_equal(
        libc::SYS_socket as u32,
        0,
        socket_rules.len() as u8,
    ));
    program.extend(socket_rules);
    // socketpair(domain, type, …): a connected pair, of a kind that cannot
    // be pointed elsewhere (a datagram socket can `sendto` any address).
    let type_without_flags = !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32;
    program.extend([
        jump_if_equal(libc::SYS_socketpair as u32, 0, 6),
        load(argument(1)),
        statement(
            libc::BPF_ALU | libc::BPF_AND | libc::BPF_K,
            type_without_flags,
        ),
        jump_if_equal(libc::SOCK_STREAM as u32, 2, 0),
        jump_if_equal(libc::SOCK_SEQPACKET as u32, 1, 0),
        refuse(libc::EACCES),
        allow,
        // Any other call.
        allow,
    ]);
    program
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;

    /// Every jump lands inside the program and the program ends in a
    /// return: the kernel would refuse it otherwise, at the first agent.
    #[test]
    fn the_programs_jumps_stay_inside_it() {
        for network in [Network::None, Network::Internet] {
            let program = program(network);
            assert!(program.len() < 4096);
            for (at, instruction) in program.iter().enumerate() {
                if u32::from(instruction.code) & 0x07 == libc::BPF_JMP {
                    let furthest = at + 1 + usize::from(instruction.jt.max(instruction.jf));
                    assert!(furthest < program.len(), "jump at {at} leaves the program");
                }
            }
            let last = program.last().unwrap();
            assert_eq!(u32::from(last.code), libc::BPF_RET | libc::BPF_K);
        }
    }
}
