//! vCenter credentials. The password is a `SecretString`: it has no `Display`, its `Debug` is
//! redacted, and it is exposed only where a request is built.
use std::fmt;

use secrecy::{ExposeSecret, SecretString};

#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    password: SecretString,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: SecretString) -> Self {
        Self {
            username: username.into(),
            password,
        }
    }

    pub(crate) fn password(&self) -> &str {
        self.password.expose_secret()
    }

    /// A stable, non-reversible fingerprint of the password, so a session cache can tell a
    /// rotated password from the old one without holding it as a key.
    pub fn password_fingerprint(&self) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.password.expose_secret().as_bytes());
        // A SHA-256 digest is 32 bytes: the slice cannot fail.
        hex::encode(&digest[..8])
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"[REDACTED]")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let c = Credentials::new("admin", SecretString::from("hunter2-secret"));
        let shown = format!("{c:?}");
        assert!(shown.contains("admin"));
        assert!(!shown.contains("hunter2"));
        assert_ne!(c.password_fingerprint(), "hunter2-secret");
    }
}
