//! Library errors. Each carries the file it concerns; the CLI prints them on
//! one line and maps them to exit code 2.

use std::path::PathBuf;

use thiserror::Error;

use crate::btf::read::ReadError;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: invalid BTF: {source}")]
    Btf { path: PathBuf, source: ReadError },
    #[error("{path}: {msg}")]
    Elf { path: PathBuf, msg: String },
    #[error("{path}: {msg}")]
    Input { path: PathBuf, msg: String },
    /// Valid input that btfkit will not encode (the message says why).
    #[error("{path}: {msg}")]
    Unsupported { path: PathBuf, msg: String },
    /// Standard output is a pipe whose reader stopped reading (`| head`):
    /// for a filter, the end of the job rather than a failure.
    #[error("standard output: the reader closed the pipe")]
    StdoutClosed,
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub fn elf(path: impl Into<PathBuf>, msg: impl Into<String>) -> Error {
        Error::Elf {
            path: path.into(),
            msg: msg.into(),
        }
    }
    pub fn unsupported(path: impl Into<PathBuf>, msg: impl Into<String>) -> Error {
        Error::Unsupported {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line, the form every report and message
/// of btfkit uses: causes the message already quotes are not repeated, and
/// line breaks become spaces.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    msg.replace('\n', " ")
}
