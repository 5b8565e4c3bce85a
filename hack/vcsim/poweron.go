package main

// The "poweron-refuse" fault: a PowerOnMultiVM_Task batch leaves named VMs not attempted, the
// way vCenter reports a VM that DRS found no host for. The task still succeeds; its
// ClusterPowerOnVmResult lists the refused VMs under notAttempted (with an
// InsufficientResourcesFault) and powers the others on. Upstream vcsim never refuses a VM of a
// batch, so without this a client's per-VM handling of that result cannot be tested live.
//
// It hooks the simulator's dispatch (Registry.Handler, called for every SOAP method before it
// runs): for a PowerOnMultiVM_Task whose VMs include a queued name, it puts a refusingDatacenter
// (the real Datacenter embedded, only that one method replaced) into the caller's session
// registry under the datacenter's moref. The simulator prefers a session's own object to the
// global one when it picks the handler (Session.Get), so the call runs the replacement, which
// takes itself out of the session registry before anything else; a same-session read of the
// datacenter in between sees the embedded Datacenter's data (the PropertyCollector unwraps
// wrappers). (The handler the hook returns cannot be used: Session.Get overrides it.) Every
// other call, and a batch without a queued name, runs upstream's code unchanged.

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

const (
	kindPowerOnRefuse = "poweron-refuse"
	powerOnMultiOp    = "PowerOnMultiVM_Task"
	// The message vCenter gives when a VM's resource pool cannot admit it.
	defaultRefuseMessage = "The available Memory resources in the parent resource pool are insufficient for the operation."
)

// dispatch is the simulator's Registry.Handler: it swaps in refusingDatacenter for a batch
// power-on that names a VM queued for refusal, and leaves every other call alone.
func (c *control) dispatch(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if m.Name != powerOnMultiOp || ctx.Session == nil {
		return nil, nil // without a session the call is refused as NotAuthenticated anyway
	}
	dc, ok := ctx.Map.Get(m.This).(*simulator.Datacenter)
	if !ok {
		return nil, nil
	}
	req, ok := m.Body.(*types.PowerOnMultiVM_Task)
	if !ok {
		return nil, nil
	}
	refused := c.takeRefusals(ctx, req.Vm)
	if len(refused) == 0 {
		return nil, nil
	}
	ctx.Session.Put(&refusingDatacenter{Datacenter: dc, refused: refused})
	return nil, nil
}

// takeRefusals pops one unit of the first queued poweron-refuse entry for each VM of the batch
// whose name it names; returns VM → the message to refuse it with.
func (c *control) takeRefusals(ctx *simulator.Context, vms []types.ManagedObjectReference) map[types.ManagedObjectReference]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[types.ManagedObjectReference]string
	for _, ref := range vms {
		e, ok := ctx.Map.Get(ref).(mo.Entity)
		if !ok {
			continue
		}
		name := e.Entity().Name
		for i, f := range c.faults {
			if f.Kind != kindPowerOnRefuse || f.VM != name {
				continue
			}
			f.Count--
			if f.Count <= 0 {
				c.faults = append(c.faults[:i], c.faults[i+1:]...)
			}
			msg := f.Message
			if msg == "" {
				msg = defaultRefuseMessage
			}
			if out == nil {
				out = make(map[types.ManagedObjectReference]string)
			}
			out[ref] = msg
			break
		}
	}
	return out
}

// refusingDatacenter is a Datacenter whose PowerOnMultiVM_Task leaves the refused VMs not
// attempted. It is built per call and lives in the caller's session registry only until the
// call starts.
type refusingDatacenter struct {
	*simulator.Datacenter
	refused map[types.ManagedObjectReference]string
}

// PowerOnMultiVMTask answers like vCenter with DRS: one task on the datacenter whose result
// has an attempted entry (with the VM's own power-on task) per VM it started and a notAttempted
// entry (with the fault) per VM it did not. A VM whose own power-on is refused at once (a
// template, say) is reported not attempted too, rather than crashing the simulator.
func (dc *refusingDatacenter) PowerOnMultiVMTask(ctx *simulator.Context, req *types.PowerOnMultiVM_Task) soap.HasFault {
	ctx.Session.Registry.Remove(ctx, dc.Self)
	run := func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		var res types.ClusterPowerOnVmResult
		for _, ref := range req.Vm {
			if msg, no := dc.refused[ref]; no {
				res.NotAttempted = append(res.NotAttempted, types.ClusterNotAttemptedVmInfo{
					Vm:    ref,
					Fault: types.LocalizedMethodFault{Fault: new(types.InsufficientResourcesFault), LocalizedMessage: msg},
				})
				continue
			}
			vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
			if !ok {
				continue // as upstream: a reference that is not a VM is skipped
			}
			// The VM's own task gets a context of its own (the simulator ties one task to one
			// context).
			vmCtx := &simulator.Context{Context: ctx.Context, Session: ctx.Session, Map: ctx.Map}
			vmCtx.WithLock(vm, func() {
				out := vm.PowerOnVMTask(vmCtx, &types.PowerOnVM_Task{This: ref})
				if body, ok := out.(*methods.PowerOnVM_TaskBody); ok && body.Res != nil {
					task := body.Res.Returnval
					res.Attempted = append(res.Attempted, types.ClusterAttemptedVmInfo{Vm: ref, Task: &task})
					return
				}
				fault := types.LocalizedMethodFault{LocalizedMessage: "power-on refused"}
				if f := out.Fault(); f != nil {
					if d, ok := f.Detail.Fault.(types.BaseMethodFault); ok {
						fault.Fault = d
					}
					fault.LocalizedMessage = f.String
				}
				if fault.Fault == nil {
					fault.Fault = new(types.InvalidState)
				}
				res.NotAttempted = append(res.NotAttempted, types.ClusterNotAttemptedVmInfo{Vm: ref, Fault: fault})
			})
		}
		return res, nil
	}
	task := simulator.CreateTask(dc.Datacenter, "powerOnMultiVM", run)
	return &methods.PowerOnMultiVM_TaskBody{
		Res: &types.PowerOnMultiVM_TaskResponse{Returnval: task.Run(ctx)},
	}
}
