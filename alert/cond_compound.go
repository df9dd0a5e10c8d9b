package alert

// KindCompound makes a rule of several conditions: all of them (all:) or
// any of them (any:) must hold. Compound conditions do not nest.
const KindCompound = "compound"

// compileConditions compiles a rule's condition, or its all: or any:
// list, reporting problems through bad; mode is "", "all" or "any".
func compileConditions(rc *RuleConfig, c *Config, bad func(string, ...any)) (mode string, conds []condition) {
	kind := rc.Kind
	if kind == "" && (rc.All != nil || rc.Any != nil) {
		kind = KindCompound
	}
	switch {
	case kind == KindCompound:
		if (rc.All == nil) == (rc.Any == nil) {
			bad("compound: set exactly one of all and any")
		}
		list, name := rc.All, "all"
		if rc.Any != nil {
			list, name = rc.Any, "any"
		}
		for i := range list {
			if list[i].Kind == KindCompound {
				bad("%s[%d].kind: compound conditions do not nest", name, i)
				continue
			}
			cd, err := compileCond(&list[i], c)
			if err != nil {
				bad("%s[%d]: %v", name, i, err)
				continue
			}
			conds = append(conds, cd)
		}
		if len(list) == 0 {
			bad("%s: no conditions", name)
		}
		return name, conds
	case rc.All != nil || rc.Any != nil:
		bad("all/any: only for kind compound")
	default:
		cd, err := compileCond(&rc.Condition, c)
		if err != nil {
			bad("%v", err)
		} else {
			conds = []condition{cd}
		}
	}
	return "", conds
}

// combine folds a rule's condition outcomes: all holds unless one does
// not, any does not hold unless one does, and an unknown outcome leaves
// the rest unknown.
func combine(mode string, os []outcome) tri {
	if mode == "" || len(os) == 1 {
		return os[0].holds
	}
	all := mode == "all"
	res := yes
	if !all {
		res = no
	}
	for _, o := range os {
		switch {
		case all && o.holds == no, !all && o.holds == yes:
			return o.holds
		case o.holds == unknown:
			res = unknown
		}
	}
	return res
}
