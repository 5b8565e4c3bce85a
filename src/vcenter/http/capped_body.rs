//! Reading a reply body with a ceiling. Any tenant who can name a server can make the manager
//! talk to a host of their choosing (until the server allow-list lands), and that host can send
//! an endless body; read whole, it ends in an OOM kill of the manager for every tenant. So a
//! body is read in chunks as it arrives and given up, connection and all, at the cap.

/// Why a body was not read.
pub(crate) enum BodyError {
    /// More than this many bytes (announced or sent).
    TooLarge(u64),
    /// The transport failed while reading.
    Transport(reqwest::Error),
}

/// The body of `resp`, at most `limit` bytes, decoded as UTF-8 (invalid sequences replaced, as
/// `reqwest::Response::text` does for vCenter's UTF-8 replies). A `Content-Length` above the
/// limit fails before anything is read.
pub(crate) async fn read(mut resp: reqwest::Response, limit: u64) -> Result<String, BodyError> {
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(BodyError::TooLarge(limit));
    }
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Transport)? {
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(BodyError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match String::from_utf8(body) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}
