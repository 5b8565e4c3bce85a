package main

// `workload-sim vm`: the few govc-like calls a smoke test needs, so it needs no govc.
//
//	workload-sim vm --vcenter URL --name VM [--set KEY=VALUE|KEY=@FILE]... [--power on|off] [--destroy] [--uuid]
//
// Steps run in this order: power off (when --power off or --destroy), --set (one reconfigure),
// power on, destroy, and --uuid prints the VM's BIOS UUID (config.uuid).

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func vmMain(args []string) int {
	fs := flag.NewFlagSet("workload-sim vm", flag.ContinueOnError)
	vc := fs.String("vcenter", os.Getenv("VSPHERE_SERVER"), "vcsim SDK URL")
	user := fs.String("username", os.Getenv("VSPHERE_USERNAME"), "user")
	pass := fs.String("password", os.Getenv("VSPHERE_PASSWORD"), "password")
	name := fs.String("name", "", "VM name (or inventory path)")
	power := fs.String("power", "", "on or off")
	destroy := fs.Bool("destroy", false, "power off and destroy the VM")
	uuid := fs.Bool("uuid", false, "print config.uuid")
	var sets multi
	fs.Var(&sets, "set", "extraConfig KEY=VALUE or KEY=@FILE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := vmRun(*vc, *user, *pass, *name, *power, *destroy, *uuid, sets); err != nil {
		fmt.Fprintf(os.Stderr, "workload-sim vm: %v\n", err)
		return 1
	}
	return 0
}

func vmRun(vc, user, pass, name, power string, destroy, printUUID bool, sets []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u, err := url.Parse(vc)
	if err != nil || vc == "" || name == "" {
		return fmt.Errorf("--vcenter and --name are required")
	}
	if user == "" {
		user, pass = "user", "pass"
	}
	u.User = url.UserPassword(user, pass)
	c, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(context.Background()) }()
	wait := func(t *object.Task, err error) error {
		if err != nil {
			return err
		}
		return t.Wait(ctx)
	}
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.DefaultDatacenter(ctx)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	vm, err := finder.VirtualMachine(ctx, name)
	if err != nil {
		return err
	}
	state, err := vm.PowerState(ctx)
	if err != nil {
		return err
	}
	if (power == "off" || destroy) && state == types.VirtualMachinePowerStatePoweredOn {
		if err := wait(vm.PowerOff(ctx)); err != nil {
			return fmt.Errorf("power off: %w", err)
		}
	}
	if len(sets) > 0 {
		var ec []types.BaseOptionValue
		for _, kv := range sets {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("--set %q: want KEY=VALUE", kv)
			}
			if f, isFile := strings.CutPrefix(v, "@"); isFile {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				v = strings.TrimRight(string(b), "\n")
			}
			ec = append(ec, &types.OptionValue{Key: k, Value: v})
		}
		if err := wait(vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: ec})); err != nil {
			return fmt.Errorf("reconfigure: %w", err)
		}
	}
	if power == "on" {
		if err := wait(vm.PowerOn(ctx)); err != nil {
			return fmt.Errorf("power on: %w", err)
		}
	}
	if destroy {
		if err := wait(vm.Destroy(ctx)); err != nil {
			return fmt.Errorf("destroy: %w", err)
		}
	}
	if printUUID {
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"config.uuid"}, &m); err != nil {
			return err
		}
		fmt.Println(m.Config.Uuid)
	}
	return nil
}
