package main

// -layout FILE: reshape the generated model into a named estate before the URL is published, so
// manifests written for a real vCenter (OpenShift's Infrastructure with datacenter "IBMCloud",
// clusters "vcs-mdcnc-workload-1", …) can be reconciled against vcsim unchanged.
//
// The file is a JSON list of steps, applied in order through the simulator's own SOAP API (the
// same calls a client would make, so names, inventory paths and parents stay consistent):
//
//	{"rename": "/DC0/host/DC0_C0", "to": "workload-1"}     Rename_Task (datacenter, cluster, folder, VM)
//	{"folder": "/IBMCloud/vm/infra-id"}                      CreateFolder under the parent path
//	{"pool": "/IBMCloud/host/workload-1/Resources/rp"}      CreateResourcePool under the parent pool
//	{"datastore": "ds-1", "cluster": "/IBMCloud/host/workload-1", "hosts": ["/IBMCloud/host/DC0_H0/DC0_H0"]}
//	                                                         one local datastore (a fresh temp directory)
//	                                                         shared by every host of the cluster and
//	                                                         the hosts listed
//	{"portgroup": "ci-vlan-1289", "switch": "/IBMCloud/network/DC0_DVS"}
//	                                                         a distributed port group on that switch
//	{"clone": "/IBMCloud/vm/DC0_H0_VM0", "to": "/IBMCloud/vm/infra-id/tmpl", "pool": "/IBMCloud/host/workload-1/Resources"}
//	                                                         CloneVM_Task (powered off), e.g. a template per zone
//
// vcsim cannot rename datastores or standard networks (no RenameDatastore / Rename_Task on them;
// since 0.24.2 it can rename DV port groups), hence create steps. Without location.host it also
// places every clone on its source VM's host, whatever pool the clone goes to (real vCenter
// picks a host of the destination cluster; simulator/virtual_machine.go CloneVMTask, still so in
// v0.56.0), so a datastore a clone of a template is put on must be mounted on the template's
// host too: hence "hosts".

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

type layoutStep struct {
	Rename    string   `json:"rename,omitempty"`
	To        string   `json:"to,omitempty"`
	Folder    string   `json:"folder,omitempty"`
	Pool      string   `json:"pool,omitempty"`
	Datastore string   `json:"datastore,omitempty"`
	Cluster   string   `json:"cluster,omitempty"`
	Hosts     []string `json:"hosts,omitempty"`
	Portgroup string   `json:"portgroup,omitempty"`
	Switch    string   `json:"switch,omitempty"`
	Clone     string   `json:"clone,omitempty"`
}

// readLayout parses the file strictly: an unknown key is an error naming the step.
func readLayout(file string) ([]layoutStep, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: expected a JSON list of steps: %v", file, err)
	}
	steps := make([]layoutStep, len(raw))
	for i, r := range raw {
		dec := json.NewDecoder(strings.NewReader(string(r)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&steps[i]); err != nil {
			return nil, fmt.Errorf("%s: step %d: %v", file, i, err)
		}
	}
	return steps, nil
}

// applyLayout runs the steps against the simulator at u; tmpDirs collects the datastore
// directories to remove at exit.
func applyLayout(u *url.URL, steps []layoutStep, tmpDirs *[]string) error {
	ctx := context.Background()
	c, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		return fmt.Errorf("connecting: %v", err)
	}
	defer c.Logout(ctx)
	si := object.NewSearchIndex(c.Client)
	find := func(p string) (object.Reference, error) {
		ref, err := si.FindByInventoryPath(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		if ref == nil {
			return nil, fmt.Errorf("%s: not found", p)
		}
		return ref, nil
	}
	for i, s := range steps {
		if err := applyStep(ctx, c, find, s, tmpDirs); err != nil {
			return fmt.Errorf("step %d: %v", i, err)
		}
	}
	return nil
}

func applyStep(ctx context.Context, c *govmomi.Client, find func(string) (object.Reference, error), s layoutStep, tmpDirs *[]string) error {
	switch {
	case s.Rename != "":
		ref, err := find(s.Rename)
		if err != nil {
			return err
		}
		task, err := object.NewCommon(c.Client, ref.Reference()).Rename(ctx, s.To)
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	case s.Folder != "":
		ref, err := find(path.Dir(s.Folder))
		if err != nil {
			return err
		}
		_, err = object.NewFolder(c.Client, ref.Reference()).CreateFolder(ctx, path.Base(s.Folder))
		return err
	case s.Pool != "" && s.Clone == "":
		ref, err := find(path.Dir(s.Pool))
		if err != nil {
			return err
		}
		_, err = object.NewResourcePool(c.Client, ref.Reference()).Create(ctx, path.Base(s.Pool), types.DefaultResourceConfigSpec())
		return err
	case s.Datastore != "":
		ref, err := find(s.Cluster)
		if err != nil {
			return err
		}
		var cluster mo.ClusterComputeResource
		if err := c.RetrieveOne(ctx, ref.Reference(), []string{"host"}, &cluster); err != nil {
			return err
		}
		hosts := cluster.Host
		for _, p := range s.Hosts {
			h, err := find(p)
			if err != nil {
				return err
			}
			hosts = append(hosts, h.Reference())
		}
		dir, err := os.MkdirTemp("", "vcsim-layout-ds-")
		if err != nil {
			return err
		}
		*tmpDirs = append(*tmpDirs, dir)
		for _, h := range hosts {
			host := object.NewHostSystem(c.Client, h)
			dss, err := host.ConfigManager().DatastoreSystem(ctx)
			if err != nil {
				return err
			}
			if _, err := dss.CreateLocalDatastore(ctx, s.Datastore, dir); err != nil {
				return fmt.Errorf("datastore %s on %s: %v", s.Datastore, h.Value, err)
			}
		}
		return nil
	case s.Portgroup != "":
		ref, err := find(s.Switch)
		if err != nil {
			return err
		}
		dvs := object.NewDistributedVirtualSwitch(c.Client, ref.Reference())
		task, err := dvs.AddPortgroup(ctx, []types.DVPortgroupConfigSpec{{Name: s.Portgroup, Type: string(types.DistributedVirtualPortgroupPortgroupTypeEarlyBinding), NumPorts: 16}})
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	case s.Clone != "":
		src, err := find(s.Clone)
		if err != nil {
			return err
		}
		folder, err := find(path.Dir(s.To))
		if err != nil {
			return err
		}
		spec := types.VirtualMachineCloneSpec{PowerOn: false}
		if s.Pool != "" {
			pool, err := find(s.Pool)
			if err != nil {
				return err
			}
			r := pool.Reference()
			spec.Location.Pool = &r
		}
		vm := object.NewVirtualMachine(c.Client, src.Reference())
		task, err := vm.Clone(ctx, object.NewFolder(c.Client, folder.Reference()), path.Base(s.To), spec)
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	}
	return fmt.Errorf("no action: expected one of rename, folder, pool, datastore, portgroup, clone")
}

func removeAll(dirs []string) {
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}
