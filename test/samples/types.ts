/**
 * Sample inputs per op, like PyTorch's OpInfo samples: the meta-vs-real test runs every registered
 * op on each of its samples (contiguous, non-contiguous, broadcast, channels_last where it applies)
 * and compares the meta function's prediction with the real output.
 */
export interface OpSample {
  /** Registered op name. */
  op: string;
  /** Short description, e.g. 'channels_last input'. */
  label: string;
  /** Positional arguments for dispatch(op, ...args). Called fresh for every use. */
  args(): unknown[];
}
