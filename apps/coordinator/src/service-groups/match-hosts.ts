// Placement of a service group's members on idle agents, host first.

/**
 * An agent for each member, in rank order: an idle agent on the member's own host where there is
 * one (its data then never leaves the machine), the others by name.
 */
export function matchHosts<A extends { hostId?: string }>(joined: { hostId?: string }[], idle: A[]): A[] {
  const free = [...idle];
  const take = (i: number) => free.splice(i, 1)[0];
  const out: (A | undefined)[] = joined.map((j) => {
    const i = j.hostId ? free.findIndex((a) => a.hostId === j.hostId) : -1;
    return i >= 0 ? take(i) : undefined;
  });
  return out.map((a) => a ?? take(0));
}
