//! The capacity index: free milli-GPUs per device and node of one pool, kept so that placing
//! and freeing are logarithmic, with best-fit placement for fractions and whole GPUs.

use super::*;

/// Free capacity of one pool, indexed so that a placement is found in O(devices per node).
pub(crate) struct PoolState {
    /// Free milli-GPUs and memory per device: `free[node][device]`.
    free: Vec<Vec<MilliGpu>>,
    free_mem: Vec<Vec<u32>>,
    mem: Vec<Vec<u32>>,
    /// Nodes by number of fully free devices: `by_whole[k]` holds nodes with exactly k.
    by_whole: Vec<Vec<u32>>,
    whole_pos: Vec<(usize, usize)>,
    /// Partly used devices by free eighths (1..=7): (node, device).
    by_level: Vec<Vec<(u32, u32)>>,
    level_pos: Vec<Vec<Option<usize>>>,
    /// Nodes held this cycle: [`PoolState::find`] places only the holder's work there.
    held: Vec<Vec<Holder>>,
    /// Free milli-GPUs over all devices.
    free_total: u64,
    /// Free CPU (milli-cores) and host memory (MiB) per node; undeclared ones never run out.
    host_free: Vec<(i64, i64)>,
}

/// The free amount of a node resource that was not declared: more than any job asks.
const UNDECLARED: i64 = i64::MAX / 4;

/// Who a held node is kept for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// A job that waited past the hold threshold (see "Starvation" in the module docs). Unless
    /// it is itself within its group's reservation (`owed`), the in-quota jobs of other
    /// groups may still use the node.
    /// Its group's jobs that reach placement are all ahead of it in order (those behind it
    /// wait for it), so they may use the node too.
    Starving { job: u64, group: u32, owed: bool },
    /// A job whose victims stop there.
    Reclaim(u64),
    /// A group whose reclaim is in progress there: its victims are still stopping.
    Group(u32),
}

/// Who asks for room: a job of a group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asker {
    pub(crate) job: u64,
    pub(crate) group: u32,
    /// Within its group's reservation.
    pub(crate) in_quota: bool,
}

impl Asker {
    /// Every holder of the node lets this job in: its own reclaim, its group's hold, or a
    /// starving job of another group that is not owed the node while this job is in quota.
    fn may_use(self, holders: &[Holder]) -> bool {
        holders.iter().all(|h| match *h {
            Holder::Starving { group, owed, .. } => group == self.group || (!owed && self.in_quota),
            Holder::Reclaim(job) => job == self.job,
            Holder::Group(group) => group == self.group,
        })
    }
}

fn level(free: MilliGpu) -> usize {
    (free / 125) as usize
}

impl PoolState {
    /// Whether any device has room left (a fully free one or a partly used one).
    pub(crate) fn has_room(&self) -> bool {
        self.by_whole.iter().skip(1).any(|b| !b.is_empty())
            || self.by_level.iter().any(|b| !b.is_empty())
    }

    pub(crate) fn new(pool: &Pool) -> PoolState {
        let max_dev = pool
            .nodes
            .iter()
            .map(|n| n.devices.len())
            .max()
            .unwrap_or(0);
        let mut s = PoolState {
            free: pool
                .nodes
                .iter()
                .map(|n| vec![WHOLE; n.devices.len()])
                .collect(),
            free_mem: pool
                .nodes
                .iter()
                .map(|n| n.devices.iter().map(|d| d.memory_mb).collect())
                .collect(),
            mem: pool
                .nodes
                .iter()
                .map(|n| n.devices.iter().map(|d| d.memory_mb).collect())
                .collect(),
            by_whole: vec![Vec::new(); max_dev + 1],
            whole_pos: Vec::with_capacity(pool.nodes.len()),
            by_level: vec![Vec::new(); 8],
            level_pos: pool
                .nodes
                .iter()
                .map(|n| vec![None; n.devices.len()])
                .collect(),
            held: vec![Vec::new(); pool.nodes.len()],
            free_total: pool
                .nodes
                .iter()
                .map(|n| n.devices.len() as u64)
                .sum::<u64>()
                * WHOLE as u64,
            host_free: pool
                .nodes
                .iter()
                .map(|n| {
                    let declared = |v: u32| if v == 0 { UNDECLARED } else { v as i64 };
                    (declared(n.cpu_milli), declared(n.ram_mb))
                })
                .collect(),
        };
        for (i, n) in pool.nodes.iter().enumerate() {
            let k = n.devices.len();
            s.whole_pos.push((k, s.by_whole[k].len()));
            s.by_whole[k].push(i as u32);
        }
        s
    }

    /// The node to hold for a job of `k` whole GPUs: of those with at least `k` devices and not
    /// held already, the one with the most fully free devices (the first such on ties), with
    /// that count.
    pub(crate) fn node_to_hold(&self, k: usize) -> Option<(usize, usize)> {
        (0..self.free.len())
            .filter(|&n| self.held[n].is_empty() && self.free[n].len() >= k)
            .map(|n| (n, self.whole_free(n)))
            .fold(None, |best, (n, f)| match best {
                Some((_, bf)) if bf >= f => best,
                _ => Some((n, f)),
            })
    }

    /// Holds `node` for `holder` (beside any other holder of it).
    pub(crate) fn hold(&mut self, node: usize, holder: Holder) {
        if let Some(h) = self.held.get_mut(node) {
            if !h.contains(&holder) {
                h.push(holder);
            }
        }
    }

    /// Free milli-GPUs over all devices of the pool.
    pub(crate) fn free_total(&self) -> u64 {
        self.free_total
    }

    pub(crate) fn whole_free(&self, node: usize) -> usize {
        self.whole_pos[node].0
    }

    pub(crate) fn move_node(&mut self, node: usize, to: usize) {
        let (from, pos) = self.whole_pos[node];
        if from == to {
            return;
        }
        let last = self.by_whole[from].len() - 1;
        self.by_whole[from].swap(pos, last);
        self.by_whole[from].pop();
        if pos < self.by_whole[from].len() {
            let moved = self.by_whole[from][pos] as usize;
            self.whole_pos[moved].1 = pos;
        }
        self.whole_pos[node] = (to, self.by_whole[to].len());
        self.by_whole[to].push(node as u32);
    }

    pub(crate) fn unlevel(&mut self, node: usize, dev: usize) {
        if let Some(pos) = self.level_pos[node][dev].take() {
            let lv = level(self.free[node][dev]);
            let list = &mut self.by_level[lv];
            let last = list.len() - 1;
            list.swap(pos, last);
            list.pop();
            if pos < list.len() {
                let (n, d) = list[pos];
                self.level_pos[n as usize][d as usize] = Some(pos);
            }
        }
    }

    pub(crate) fn relevel(&mut self, node: usize, dev: usize) {
        let f = self.free[node][dev];
        if f > 0 && f < WHOLE {
            let lv = level(f);
            self.level_pos[node][dev] = Some(self.by_level[lv].len());
            self.by_level[lv].push((node as u32, dev as u32));
        }
    }

    /// Changes one device's free amount by `delta` (negative = allocate).
    pub(crate) fn adjust(&mut self, node: usize, dev: usize, delta: i64, mem_delta: i64) {
        let was_whole = self.free[node][dev] == WHOLE;
        self.unlevel(node, dev);
        self.free[node][dev] = (self.free[node][dev] as i64 + delta) as MilliGpu;
        self.free_total = (self.free_total as i64 + delta) as u64;
        self.free_mem[node][dev] = (self.free_mem[node][dev] as i64 + mem_delta).max(0) as u32;
        self.relevel(node, dev);
        let is_whole = self.free[node][dev] == WHOLE;
        if was_whole != is_whole {
            let k = self.whole_free(node);
            self.move_node(node, if is_whole { k + 1 } else { k - 1 });
        }
    }

    /// Whether the node has the CPU and host memory a job asks for.
    pub(crate) fn host_fits(&self, node: usize, d: &Demand) -> bool {
        let (cpu, ram) = self.host_free[node];
        cpu >= d.cpu_milli as i64 && ram >= d.ram_mb as i64
    }

    /// Takes (`sign` 1) or gives back (`sign` -1) what a job holds at `p`.
    pub(crate) fn apply(&mut self, p: &Placement, d: &Demand, sign: i64) {
        let memory_mb = d.memory_mb;
        if let Some(h) = self.host_free.get_mut(p.node as usize) {
            h.0 -= sign * d.cpu_milli as i64;
            h.1 -= sign * d.ram_mb as i64;
        }
        for &(dev, m) in &p.slices {
            // A fraction holds the memory it asked for, or with 0 its share of the device's
            // (as the fit check counts it): never nothing.
            let mem = if m < WHOLE {
                self.memory_for(p.node as usize, dev as usize, m, memory_mb) as i64
            } else {
                self.mem[p.node as usize][dev as usize] as i64
            };
            self.adjust(p.node as usize, dev as usize, -sign * m as i64, -sign * mem);
        }
    }

    pub(crate) fn memory_for(
        &self,
        node: usize,
        dev: usize,
        gpus: MilliGpu,
        memory_mb: u32,
    ) -> u32 {
        if memory_mb > 0 {
            memory_mb
        } else {
            ((self.mem[node][dev] as u64 * gpus as u64) / WHOLE as u64) as u32
        }
    }

    /// Room for a job on one given node.
    pub(crate) fn find_on(
        &self,
        pool: u32,
        n: usize,
        d: &Demand,
        asker: Asker,
    ) -> Option<Placement> {
        let (gpus, memory_mb) = (d.gpus, d.memory_mb);
        if !asker.may_use(&self.held[n]) || !self.host_fits(n, d) {
            return None;
        }
        if gpus < WHOLE {
            // Fullest device that fits.
            (0..self.free[n].len())
                .filter(|&d| {
                    self.free[n][d] >= gpus
                        && self.free_mem[n][d] >= self.memory_for(n, d, gpus, memory_mb)
                })
                .min_by_key(|&d| self.free[n][d])
                .map(|d| Placement {
                    pool,
                    node: n as u32,
                    slices: vec![(d as u32, gpus)],
                })
        } else {
            let k = (gpus / WHOLE) as usize;
            let devs: Vec<u32> = (0..self.free[n].len())
                .filter(|&d| self.free[n][d] == WHOLE)
                .map(|d| d as u32)
                .take(k)
                .collect();
            (devs.len() == k && gpus.is_multiple_of(WHOLE)).then(|| Placement {
                pool,
                node: n as u32,
                slices: devs.into_iter().map(|d| (d, WHOLE)).collect(),
            })
        }
    }

    /// Finds room for a job without changing anything.
    pub(crate) fn find(&self, pool: u32, dm: &Demand, asker: Asker) -> Option<Placement> {
        let (gpus, memory_mb) = (dm.gpus, dm.memory_mb);
        if gpus == 0 {
            return None;
        }
        if gpus < WHOLE {
            // Best fit among partly used devices, fullest first; then a fully free one.
            for lv in level(gpus)..8 {
                for &(n, d) in &self.by_level[lv] {
                    let (n, d) = (n as usize, d as usize);
                    if asker.may_use(&self.held[n])
                        && self.host_fits(n, dm)
                        && self.free[n][d] >= gpus
                        && self.free_mem[n][d] >= self.memory_for(n, d, gpus, memory_mb)
                    {
                        return Some(Placement {
                            pool,
                            node: n as u32,
                            slices: vec![(d as u32, gpus)],
                        });
                    }
                }
            }
            for k in 1..self.by_whole.len() {
                for &n in &self.by_whole[k] {
                    let n = n as usize;
                    if !asker.may_use(&self.held[n]) || !self.host_fits(n, dm) {
                        continue;
                    }
                    if let Some(d) = (0..self.free[n].len()).find(|&d| {
                        self.free[n][d] == WHOLE
                            && self.mem[n][d] >= self.memory_for(n, d, gpus, memory_mb)
                    }) {
                        return Some(Placement {
                            pool,
                            node: n as u32,
                            slices: vec![(d as u32, gpus)],
                        });
                    }
                }
            }
            return None;
        }
        let k = (gpus / WHOLE) as usize;
        if !gpus.is_multiple_of(WHOLE) || k >= self.by_whole.len() {
            return None;
        }
        let n = (k..self.by_whole.len()).find_map(|c| {
            self.by_whole[c]
                .iter()
                .copied()
                .find(|&n| asker.may_use(&self.held[n as usize]) && self.host_fits(n as usize, dm))
        })? as usize;
        let slices = (0..self.free[n].len())
            .filter(|&d| self.free[n][d] == WHOLE)
            .take(k)
            .map(|d| (d as u32, WHOLE))
            .collect();
        Some(Placement {
            pool,
            node: n as u32,
            slices,
        })
    }

    /// What keeps a job from fitting in this pool now, from the closest miss: a node (or
    /// device) with the GPUs but held for another job, short of CPU or host memory, or a
    /// device short of GPU memory; else GPUs free in all but not together; else too few GPUs.
    /// A held node counts as held whoever it is held for: a job of the holder's own group
    /// that still waits is behind the held job, or is it.
    pub(crate) fn short(&self, dm: &Demand) -> Short {
        let mut best: Option<Short> = None;
        let mut note = |s: Short| {
            if best.is_none_or(|b| s.closeness() > b.closeness()) {
                best = Some(s);
            }
        };
        for n in 0..self.free.len() {
            let gpu_room = if dm.gpus < WHOLE {
                let mut room = false;
                for d in 0..self.free[n].len() {
                    if self.free[n][d] >= dm.gpus {
                        if self.free_mem[n][d] >= self.memory_for(n, d, dm.gpus, dm.memory_mb) {
                            room = true;
                        } else {
                            note(Short::GpuMemory);
                        }
                    }
                }
                room
            } else {
                self.whole_free(n) as u64 * WHOLE as u64 >= dm.gpus as u64
            };
            if !gpu_room {
                continue;
            }
            let (cpu, ram) = self.host_free[n];
            if cpu < dm.cpu_milli as i64 {
                note(Short::Cpu);
            } else if ram < dm.ram_mb as i64 {
                note(Short::HostMemory);
            } else if !self.held[n].is_empty() {
                note(Short::Held);
            }
        }
        best.unwrap_or(if self.free_total >= dm.gpus as u64 {
            Short::Fragmented
        } else {
            Short::Gpus
        })
    }
}
