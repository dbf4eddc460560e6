//! The supervisor between verifine and a confined program: a forked copy of
//! the spawned child that makes itself a child subreaper, forks the program
//! and waits. Whatever the program starts — in the background, in a new
//! session (`setsid`), double-forked — stays its descendant or is reparented
//! to it, so when the program exits, the deadline passes or verifine goes
//! away, it kills every descendant and reaps them before it exits itself.
//! Nothing the program started then holds a pipe verifine reads.
//!
//! Everything here runs between `fork` and `exec` of a multi-threaded
//! process: only system calls, no allocation, no locks, no panics.

use std::os::fd::RawFd;

/// The supervisor's exit code when it stopped the program at the deadline.
pub const KILLED_AT_DEADLINE: i32 = 124;
/// Its exit code when the program could not be forked.
const FORK_FAILED: i32 = 126;

/// How often the supervisor looks at the clock and its parent.
const POLL: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 10_000_000,
};

/// The monotonic clock now, in nanoseconds.
pub fn monotonic_nanos() -> i128 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}

/// Called in the spawned child. Returns `Ok(())` in the program's process
/// (after `confine` ran there), where the caller goes on to `exec`; in the
/// supervisor it never returns.
pub fn split(
    deadline_nanos: i128,
    parent: libc::pid_t,
    confine: impl Fn() -> std::io::Result<()>,
) -> std::io::Result<()> {
    // SAFETY: system calls on integers; the supervisor branch ends in _exit.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let program = libc::fork();
        if program == 0 {
            return confine();
        }
        // The supervisor keeps no descriptor but the standard three: the
        // spawning side waits for exec's error pipe to close.
        close_from(3);
        if program < 0 {
            libc::_exit(FORK_FAILED);
        }
        let code = supervise(program, deadline_nanos, parent);
        kill_descendants();
        libc::_exit(code)
    }
}

/// Waits for `program`, reaping whatever else is reparented here meanwhile;
/// returns the exit code to pass on.
fn supervise(program: libc::pid_t, deadline_nanos: i128, parent: libc::pid_t) -> i32 {
    loop {
        loop {
            let mut status = 0;
            // SAFETY: writes into `status`.
            let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if reaped == program {
                return if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                };
            }
            if reaped <= 0 {
                break;
            }
        }
        if monotonic_nanos() >= deadline_nanos {
            return KILLED_AT_DEADLINE;
        }
        // SAFETY: no arguments.
        if unsafe { libc::getppid() } != parent {
            return KILLED_AT_DEADLINE;
        }
        // SAFETY: reads `POLL`.
        unsafe { libc::nanosleep(&POLL, std::ptr::null_mut()) };
    }
}

/// Kills every process below this one, level by level: a killed process's
/// children are reparented here (we are their subreaper) and killed in the
/// next pass. A killed process cannot fork, so the passes end.
fn kill_descendants() {
    // SAFETY: no arguments.
    let me = unsafe { libc::getpid() };
    loop {
        for_each_child_of(me, |pid| {
            // SAFETY: signals a process that is our child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let mut status = 0;
        loop {
            // SAFETY: writes into `status`.
            let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if reaped > 0 {
                continue;
            }
            if reaped < 0 {
                // ECHILD: nothing left below us.
                return;
            }
            break;
        }
        // SAFETY: reads `POLL`.
        unsafe { libc::nanosleep(&POLL, std::ptr::null_mut()) };
    }
}

/// Calls `visit` with every process whose parent is `parent`, read from
/// `/proc/<pid>/stat` (the per-task `children` file is not built into
/// every kernel).
fn for_each_child_of(parent: libc::pid_t, mut visit: impl FnMut(libc::pid_t)) {
    // SAFETY: a NUL-terminated literal.
    let dir = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return;
    }
    let mut entries = [0u8; 8192];
    loop {
        // SAFETY: the kernel writes at most `entries.len()` bytes.
        let filled = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir,
                entries.as_mut_ptr(),
                entries.len(),
            )
        };
        if filled <= 0 {
            break;
        }
        let mut offset = 0usize;
        let filled = filled as usize;
        // linux_dirent64: inode (8), offset (8), record length (2),
        // type (1), then the NUL-terminated name.
        while offset + 19 < filled {
            let length = u16::from_ne_bytes([entries[offset + 16], entries[offset + 17]]) as usize;
            if length == 0 {
                break;
            }
            let name = &entries[offset + 19..(offset + length).min(filled)];
            if let Some(pid) = parse_pid(name)
                && parent_of(pid) == Some(parent)
            {
                visit(pid);
            }
            offset += length;
        }
    }
    // SAFETY: we opened it.
    unsafe { libc::close(dir) };
}

/// The leading decimal number of a NUL-terminated name, if that is all it is.
fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    let mut pid: libc::pid_t = 0;
    let mut digits = 0;
    for &byte in name {
        match byte {
            0 => break,
            b'0'..=b'9' => {
                pid = pid
                    .checked_mul(10)?
                    .checked_add(libc::pid_t::from(byte - b'0'))?;
                digits += 1;
            }
            _ => return None,
        }
    }
    (digits > 0).then_some(pid)
}

/// The parent of `pid` (field 4 of `/proc/<pid>/stat`, after the command
/// name in parentheses, which may itself hold spaces and parentheses).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let end = prefix.len() + write_decimal(&mut path[prefix.len()..], pid)?;
    let suffix = b"/stat\0";
    path.get_mut(end..end + suffix.len())?
        .copy_from_slice(suffix);
    // SAFETY: `path` is NUL-terminated.
    let fd: RawFd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut stat = [0u8; 512];
    // SAFETY: reads at most `stat.len()` bytes into it.
    let read = unsafe { libc::read(fd, stat.as_mut_ptr().cast(), stat.len()) };
    // SAFETY: we opened it.
    unsafe { libc::close(fd) };
    let stat = stat.get(..usize::try_from(read).ok()?)?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    // ") S 1234 ": skip the state, read the parent.
    let rest = stat.get(close + 4..)?;
    let mut parent: libc::pid_t = 0;
    for &byte in rest {
        if !byte.is_ascii_digit() {
            break;
        }
        parent = parent
            .checked_mul(10)?
            .checked_add(libc::pid_t::from(byte - b'0'))?;
    }
    Some(parent)
}

/// Writes `value` in decimal at the start of `out`; the digits written.
fn write_decimal(out: &mut [u8], value: libc::pid_t) -> Option<usize> {
    let mut digits = [0u8; 12];
    let mut rest = u32::try_from(value).ok()?;
    let mut count = 0;
    loop {
        *digits.get_mut(count)? = b'0' + (rest % 10) as u8;
        count += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for i in 0..count {
        *out.get_mut(i)? = digits[count - 1 - i];
    }
    Some(count)
}

/// Closes every descriptor from `first` up.
fn close_from(first: u32) {
    // SAFETY: closes descriptors only.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    if closed != 0 {
        for fd in first..4096 {
            // SAFETY: closing a descriptor that may not be open is harmless.
            unsafe { libc::close(fd as RawFd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_and_parents_are_read_from_proc() {
        assert_eq!(parse_pid(b"1234\0junk"), Some(1234));
        assert_eq!(parse_pid(b"self\0"), None);
        assert_eq!(parse_pid(b"\0"), None);
        let me = std::process::id() as libc::pid_t;
        // SAFETY: no arguments.
        assert_eq!(parent_of(me), Some(unsafe { libc::getppid() }));
        let mut out = [0u8; 12];
        let n = write_decimal(&mut out, 40213).unwrap();
        assert_eq!(&out[..n], b"40213");
    }
}
