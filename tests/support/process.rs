//! For the resilience and fault tests on the real API server: `vsphere-provider run` as a
//! process whose log the test reads line by line (and can SIGKILL), and a reading of vcsim's
//! VMs and tags that does not go through the provider's own vCenter client (raw SOAP and REST
//! over reqwest), so a duplicate our client would hide is still seen.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `vsphere-provider run`; killed when dropped. Its stderr is kept whole
/// ([`Manager::log`]) and can be waited on ([`Manager::wait_line`]).
pub struct Manager {
    pub name: String,
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    /// How many lines [`Manager::wait_line`] has looked at.
    seen: usize,
}

impl Manager {
    /// `vsphere-provider --log-level info run ARGS` with `kubeconfig`, as pod `name`
    /// (POD_NAME: its identity in the leader Lease).
    pub fn spawn(name: &str, kubeconfig: &Path, home: &Path, args: &[&str]) -> Manager {
        Self::spawn_env(name, kubeconfig, home, args, &[])
    }

    /// As [`Manager::spawn`], with `env` set (the manager's own credentials, as a Deployment
    /// hands them over from its Secret).
    pub fn spawn_env(
        name: &str,
        kubeconfig: &Path,
        home: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Manager {
        std::fs::create_dir_all(home).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vsphere-provider"));
        cmd.env("KUBECONFIG", kubeconfig)
            .env("HOME", home)
            .env("NO_COLOR", "1")
            .env("POD_NAME", name)
            .env_remove("RUST_LOG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env_remove("POD_NAMESPACE")
            .env_remove("VSPHERE_USERNAME")
            .env_remove("VSPHERE_PASSWORD")
            .env_remove("VSPHERE_SERVER")
            .envs(env.iter().copied())
            .args(["--log-level", "info", "run"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        super::realapi::kill_when_parent_thread_dies(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let all = log.clone();
        std::thread::spawn(move || {
            let ansi = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                all.lock()
                    .unwrap()
                    .push(ansi.replace_all(&line, "").into_owned());
            }
        });
        Manager {
            name: name.to_string(),
            child,
            log,
            seen: 0,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    pub fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The log lines containing every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .collect()
    }

    /// The next line (after those earlier calls returned) containing `needle`, waiting up to
    /// `limit`; panics with the whole log if none comes or the process exits.
    pub fn wait_line(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            {
                let lines = self.log.lock().unwrap();
                while self.seen < lines.len() {
                    let line = &lines[self.seen];
                    self.seen += 1;
                    if line.contains(needle) {
                        return line.clone();
                    }
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "{} exited ({status}) before logging {needle:?}:\n{}",
                    self.name,
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{}: no log line with {needle:?} within {limit:?}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The value of `key=` in a line (`addr=127.0.0.1:1234 …`).
    pub fn field(line: &str, key: &str) -> Option<String> {
        line.split(&format!(" {key}="))
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string)
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGKILL: no drain, no lease release, no logout — a crashed or evicted pod.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then the exit code (within 60 s: the manager drains for up to 20 s).
    pub fn terminate(&mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "{} did not stop within 60 s:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The manager was never refused by the API server.
    pub fn assert_never_forbidden(&self) {
        let log = self.log();
        if std::env::var_os("REALAPI_SHOW_LOG").is_some() {
            eprintln!("--- the log of {}:\n{log}", self.name);
        }
        for refusal in ["forbidden", "Forbidden", " 403"] {
            assert!(
                !log.contains(refusal),
                "{} was refused something ({refusal}):\n{log}",
                self.name
            );
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- the log of {}:\n{}", self.name, self.log());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 250 ms for up to `limit`.
pub async fn wait_for<T, F>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Option<T>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A VM as vcsim reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vm {
    pub moref: String,
    pub name: String,
    pub instance_uuid: String,
}

/// A VM as [`Readback::vm_details`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmDetail {
    pub moref: String,
    pub name: String,
    /// `config.uuid`: what a `vsphere://` providerID carries.
    pub bios_uuid: String,
    pub power_state: String,
    /// The names of its resource pool, parent folder and datastores.
    pub pool: String,
    pub folder: String,
    pub datastores: Vec<String>,
    pub extra_config: BTreeMap<String, String>,
    pub ip: Option<String>,
}

/// The text of a simple `<val …>TEXT</val>` property.
fn simple_value(raw: &str) -> String {
    regex::Regex::new(r"(?s)<val[^>]*>([^<]*)</val>")
        .unwrap()
        .captures(raw)
        .map(|c| unescape(&c[1]))
        .unwrap_or_default()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#34;", "\"")
        .replace("&#xA;", "\n")
        .replace("&#10;", "\n")
        .replace("&amp;", "&")
}

/// A tag as vcsim reports it: its category's name, its name, the objects it is attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub category: String,
    pub name: String,
    pub attached: Vec<String>,
}

/// vcsim read without the provider's vCenter client: SOAP envelopes and REST calls written
/// here, answers picked apart with regexes.
pub struct Readback {
    http: reqwest::Client,
    sdk: String,
    base: String,
    user: String,
    password: String,
}

impl Readback {
    /// `sdk`: `https://127.0.0.1:PORT/sdk`; `base`: `https://127.0.0.1:PORT`.
    pub fn new(sdk: &str, base: &str, user: &str, password: &str) -> Readback {
        Readback {
            http: super::vcsim::insecure_client(),
            sdk: sdk.to_string(),
            base: base.to_string(),
            user: user.to_string(),
            password: password.to_string(),
        }
    }

    async fn soap(&self, cookie: Option<&str>, body: &str) -> (String, Option<String>) {
        let mut req = self
            .http
            .post(&self.sdk)
            .header("Content-Type", "text/xml; charset=utf-8")
            .header("SOAPAction", "urn:vim25/8.0.0.0")
            .body(super::vcsim::soap_envelope(body));
        if let Some(c) = cookie {
            req = req.header("Cookie", c);
        }
        let resp = req.send().await.expect("SOAP call to vcsim");
        let cookie = resp
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or_default().to_string());
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "vcsim answered {status}: {text}");
        (text, cookie)
    }

    /// A new session's cookie.
    pub async fn login(&self) -> String {
        let login = format!(
            r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>{}</userName><password>{}</password></Login>"#,
            self.user, self.password
        );
        let (_, cookie) = self.soap(None, &login).await;
        cookie.expect("vcsim sets a session cookie on Login")
    }

    /// One SOAP call in session `cookie`; the answer's text (a fault fails the test).
    pub async fn call(&self, cookie: &str, body: &str) -> String {
        self.soap(Some(cookie), body).await.0
    }

    /// Properties of one VM as text: a plain value as it is, an extraConfig entry
    /// (`config.extraConfig["key"]`) as its value, a moref as its value; absent ones are left out.
    pub async fn vm_props(&self, moref: &str, paths: &[&str]) -> BTreeMap<String, String> {
        let cookie = self.login().await;
        let path_set: String = paths
            .iter()
            .map(|p| format!("<pathSet>{}</pathSet>", p.replace('"', "&quot;")))
            .collect();
        let (props, _) = self
            .soap(
                Some(&cookie),
                &format!(
                    r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type>{path_set}</propSet><objectSet><obj type="VirtualMachine">{moref}</obj></objectSet></specSet><options/></RetrievePropertiesEx>"#
                ),
            )
            .await;
        let prop =
            regex::Regex::new(r"(?s)<propSet><name>([^<]+)</name><val[^>]*>(.*?)</val></propSet>")
                .unwrap();
        let inner = regex::Regex::new(r"(?s)<value[^>]*>(.*?)</value>").unwrap();
        prop.captures_iter(&props)
            .map(|p| {
                let name = p[1].replace("&quot;", "\"").replace("&#34;", "\"");
                let val = inner
                    .captures(&p[2])
                    .map(|v| v[1].to_string())
                    .unwrap_or_else(|| p[2].to_string());
                (name, val)
            })
            .collect()
    }

    /// Give a VM a guest IP address, as VMware Tools in a booted guest would report it (vcsim's
    /// `SET.guest.ipAddress` extraConfig key; CAPV's simulator setups do the same).
    pub async fn set_guest_ip(&self, moref: &str, ip: &str) {
        let cookie = self.login().await;
        self.soap(
            Some(&cookie),
            &format!(
                r#"<ReconfigVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{moref}</_this><spec><extraConfig><key>SET.guest.ipAddress</key><value xsi:type="xsd:string">{ip}</value></extraConfig></spec></ReconfigVM_Task>"#
            ),
        )
        .await;
    }

    /// Every object of `kind` in the inventory (a ContainerView over the root folder) with the
    /// properties `paths`: (moref, [(property, the XML inside its propSet after the name)]).
    pub async fn objects(
        &self,
        cookie: &str,
        kind: &str,
        paths: &[&str],
    ) -> Vec<(String, Vec<(String, String)>)> {
        let view = self
            .call(
                cookie,
                &format!(
                    r#"<CreateContainerView xmlns="urn:vim25"><_this type="ViewManager">ViewManager</_this><container type="Folder">group-d1</container><type>{kind}</type><recursive>true</recursive></CreateContainerView>"#
                ),
            )
            .await;
        let view = regex::Regex::new(r#"<returnval type="ContainerView">([^<]+)</returnval>"#)
            .unwrap()
            .captures(&view)
            .unwrap_or_else(|| panic!("no ContainerView in {view}"))[1]
            .to_string();
        let path_set: String = paths
            .iter()
            .map(|p| format!("<pathSet>{p}</pathSet>"))
            .collect();
        let props = self
            .call(
                cookie,
                &format!(
                    r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>{kind}</type>{path_set}</propSet><objectSet><obj type="ContainerView">{view}</obj><skip>true</skip><selectSet xsi:type="TraversalSpec"><type>ContainerView</type><path>view</path><skip>false</skip></selectSet></objectSet></specSet><options><maxObjects>10000</maxObjects></options></RetrievePropertiesEx>"#
                ),
            )
            .await;
        assert!(
            !props.contains("<token>"),
            "more {kind} objects than one page: {props}"
        );
        let object = regex::Regex::new(r"(?s)<objects>(.*?)</objects>").unwrap();
        let moref = regex::Regex::new(&format!(r#"<obj type="{kind}">([^<]+)</obj>"#)).unwrap();
        let prop = regex::Regex::new(r"(?s)<propSet><name>([^<]+)</name>(.*?)</propSet>").unwrap();
        object
            .captures_iter(&props)
            .map(|o| {
                let o = &o[1];
                let id = moref
                    .captures(o)
                    .map(|c| c[1].to_string())
                    .unwrap_or_default();
                let props = prop
                    .captures_iter(o)
                    .map(|p| (p[1].to_string(), p[2].to_string()))
                    .collect();
                (id, props)
            })
            .collect()
    }

    /// Every VirtualMachine in the inventory, by a ContainerView over the root folder.
    pub async fn vms(&self) -> Vec<Vm> {
        let cookie = self.login().await;
        self.objects(&cookie, "VirtualMachine", &["name", "config.instanceUuid"])
            .await
            .into_iter()
            .map(|(moref, props)| {
                let get = |name: &str| {
                    props
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| simple_value(v))
                        .unwrap_or_default()
                };
                Vm {
                    name: get("name"),
                    instance_uuid: get("config.instanceUuid"),
                    moref,
                }
            })
            .collect()
    }

    /// Every VirtualMachine with what the CAPI end-to-end test checks: placement (pool, folder
    /// and datastores by name), power state, BIOS UUID, extraConfig and the guest's IP.
    pub async fn vm_details(&self) -> Vec<VmDetail> {
        let cookie = self.login().await;
        let vms = self
            .objects(
                &cookie,
                "VirtualMachine",
                &[
                    "name",
                    "config.uuid",
                    "runtime.powerState",
                    "resourcePool",
                    "parent",
                    "datastore",
                    "config.extraConfig",
                    "guest.ipAddress",
                ],
            )
            .await;
        let mut names = std::collections::HashMap::new();
        for kind in ["ResourcePool", "Folder", "Datastore"] {
            for (moref, props) in self.objects(&cookie, kind, &["name"]).await {
                names.insert(moref, simple_value(&props[0].1));
            }
        }
        let name_of = |moref: &str| names.get(moref).cloned().unwrap_or(moref.to_string());
        let morefs =
            regex::Regex::new(r"<ManagedObjectReference[^>]*>([^<]+)</ManagedObjectReference>")
                .unwrap();
        let option =
            regex::Regex::new(r"(?s)<key>([^<]*)</key><value[^>]*>([^<]*)</value>").unwrap();
        vms.into_iter()
            .map(|(moref, props)| {
                let raw = |name: &str| {
                    props
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                VmDetail {
                    moref,
                    name: simple_value(&raw("name")),
                    bios_uuid: simple_value(&raw("config.uuid")),
                    power_state: simple_value(&raw("runtime.powerState")),
                    pool: name_of(&simple_value(&raw("resourcePool"))),
                    folder: name_of(&simple_value(&raw("parent"))),
                    datastores: morefs
                        .captures_iter(&raw("datastore"))
                        .map(|c| name_of(&c[1]))
                        .collect(),
                    extra_config: option
                        .captures_iter(&raw("config.extraConfig"))
                        .map(|c| (c[1].to_string(), unescape(&c[2])))
                        .collect(),
                    ip: Some(simple_value(&raw("guest.ipAddress"))).filter(|ip| !ip.is_empty()),
                }
            })
            .collect()
    }

    /// The VM groups of every compute cluster: (cluster name, group name) → member VM morefs.
    pub async fn vm_groups(&self) -> BTreeMap<(String, String), Vec<String>> {
        let cookie = self.login().await;
        let group = regex::Regex::new(
            r#"(?s)<group [^>]*type="ClusterVmGroup"><name>([^<]+)</name>(.*?)</group>"#,
        )
        .unwrap();
        let vm = regex::Regex::new(r#"<vm type="VirtualMachine">([^<]+)</vm>"#).unwrap();
        let mut out = BTreeMap::new();
        for (_, props) in self
            .objects(
                &cookie,
                "ClusterComputeResource",
                &["name", "configurationEx"],
            )
            .await
        {
            let get = |name: &str| {
                props
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            let cluster = simple_value(&get("name"));
            for g in group.captures_iter(&get("configurationEx")) {
                out.insert(
                    (cluster.clone(), g[1].to_string()),
                    vm.captures_iter(&g[2]).map(|c| c[1].to_string()).collect(),
                );
            }
        }
        out
    }

    async fn rest(&self, token: &str, method: reqwest::Method, path: &str) -> Value {
        let mut req = self
            .http
            .request(
                method.clone(),
                format!("{}/rest/com/vmware/{path}", self.base),
            )
            .header("vmware-api-session-id", token);
        if method == reqwest::Method::POST {
            // vcsim decodes a body for every action, even one that needs none.
            req = req.json(&serde_json::json!({}));
        }
        let resp = req.send().await.expect("REST call to vcsim");
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(
            status.is_success(),
            "vcsim answered {status} to {path}: {text}"
        );
        serde_json::from_str::<Value>(&text).unwrap()["value"].clone()
    }

    /// Every tag category's name, with repeats (a duplicate shows twice).
    pub async fn categories(&self) -> Vec<String> {
        let token = self.rest_login().await;
        let mut out = Vec::new();
        for id in self
            .rest(&token, reqwest::Method::GET, "cis/tagging/category")
            .await
            .as_array()
            // vcsim answers `null` for none.
            .unwrap_or(&Vec::new())
        {
            let c = self
                .rest(
                    &token,
                    reqwest::Method::GET,
                    &format!("cis/tagging/category/id:{}", id.as_str().unwrap()),
                )
                .await;
            out.push(c["name"].as_str().unwrap().to_string());
        }
        out.sort();
        out
    }

    /// Every tag, with its category's name and what it is attached to.
    pub async fn tags(&self) -> Vec<Tag> {
        let token = self.rest_login().await;
        let mut category_names = std::collections::HashMap::new();
        let mut out = Vec::new();
        for id in self
            .rest(&token, reqwest::Method::GET, "cis/tagging/tag")
            .await
            .as_array()
            // vcsim answers `null` for none.
            .unwrap_or(&Vec::new())
        {
            let id = id.as_str().unwrap();
            let t = self
                .rest(
                    &token,
                    reqwest::Method::GET,
                    &format!("cis/tagging/tag/id:{id}"),
                )
                .await;
            let category_id = t["category_id"].as_str().unwrap().to_string();
            if !category_names.contains_key(&category_id) {
                let c = self
                    .rest(
                        &token,
                        reqwest::Method::GET,
                        &format!("cis/tagging/category/id:{category_id}"),
                    )
                    .await;
                category_names.insert(category_id.clone(), c["name"].as_str().unwrap().to_string());
            }
            let attached = self
                .rest(
                    &token,
                    reqwest::Method::POST,
                    &format!("cis/tagging/tag-association/id:{id}?~action=list-attached-objects"),
                )
                .await;
            // vcsim answers `null` for a tag attached to nothing (a run killed between creating
            // a tag and attaching it leaves one).
            let mut attached: Vec<String> = attached
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| {
                    format!(
                        "{}:{}",
                        o["type"].as_str().unwrap_or_default(),
                        o["id"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            attached.sort();
            out.push(Tag {
                category: category_names[&category_id].clone(),
                name: t["name"].as_str().unwrap().to_string(),
                attached,
            });
        }
        out.sort_by(|a, b| (&a.category, &a.name).cmp(&(&b.category, &b.name)));
        out
    }

    async fn rest_login(&self) -> String {
        let resp = self
            .http
            .post(format!("{}/rest/com/vmware/cis/session", self.base))
            .basic_auth(&self.user, Some(&self.password))
            .send()
            .await
            .expect("REST login to vcsim");
        let v: Value = resp.json().await.unwrap();
        v["value"].as_str().expect("a session token").to_string()
    }
}
