// Package optim implements the ProxGen family of stochastic proximal
// gradient methods (Yun, Lozano and Yang, "A General Family of Stochastic
// Proximal Gradient Methods for Deep Learning", arXiv:2007.07484,
// https://arxiv.org/abs/2007.07484) together with the baselines the paper
// compares against: Section 2 of the paper gives the ProxGen update below
// (New, Config) and Prox-SGD's two-stage update (ProxSGD), Section 2.1 and
// Appendix C the closed-form proximal maps of ℓ0, ℓ1/2, ℓ2/3 and ℓ1 and of
// the revised ProxQuant's quantization regularizers (package optim/prox), and
// Section 4 with Appendix B the baselines and step-size schedules of the
// experiments (package optim/schedule; the annealing schedules Cosine, Warmup and
// OneCycle follow PyTorch's schedulers step by step).
//
// A ProxGen update composes three independent parts, exactly as the paper
// writes it:
//
//	m_t     = ρ_t m_{t−1} + (1 − ρ_t) g_t                       (Momentum)
//	C_t     = diagonal preconditioner built from g_1..g_t       (Preconditioner)
//	θ̄_t     = (1 − α_t ζ) θ_t                                   (decoupled weight decay, ProxGenW)
//	θ_{t+1} = prox^{C_t+δI}_{α_t λ R}(θ̄_t − α_t (C_t+δI)^{-1} m_t)  (Regularizer)
//
// Because C_t is diagonal, the proximal step separates into one-dimensional
// problems, argmin_x (x − z)²/(2η) + λ r(x) with a per-coordinate step
// η = α_t/(C_t,i + δ). Every prox.Regularizer (package optim/prox)
// implements that map. Closed forms
// are used for ℓ0, ℓ1/2, ℓ2/3 and ℓ1 and for the W-shaped binary
// regularizers; any other ℓq with 0 < q < 1 uses a safeguarded numerical
// solve that returns the global minimiser.
//
// The maps run in float32 where that is exact to about an ulp (the
// common case) and fall back to float64 elsewhere, so no finite input
// gives NaN or Inf. On amd64 with AVX2 the ℓ0, ℓ1 and ℓ1/2 maps, the
// group maps' sums and scalings and the fused Adam update use assembly
// kernels that perform the same operations in the same order as the Go
// loops (bit-identical results; build with -tags purego to use only Go).
// ProxGen takes the gradient step of a tensor with contiguous groups (output
// filters) work item by work item, each followed at once by the group maps
// of its groups while their coordinates are in cache; a tensor grouped by
// input channel is stepped in blocks of whole rows that add up each
// group's sums as they go, and its groups are then decided and scaled in
// one more pass in memory order (gathering only the few groups near a
// threshold).
//
// Optimizers work directly on *autograd.Tensor parameters (their Data and
// Grad slices), organised in Groups that each carry their own regularizer,
// λ, weight decay and learning rate. The update runs over the worker pool of
// internal/parallel on fixed-size chunks, so results do not depend on the
// number of workers. State (moment estimates, step counter, schedule state)
// can be exported as named float32 vectors plus integers and restored
// exactly, so a resumed run continues bit-identically.
//
// Group regularizers (prox.GroupL0, prox.GroupHalf, prox.GroupLasso) couple
// the coordinates of a weight's output filters, input channels or SIMD
// blocks; a Coupling adds
// per-output-channel tensors of other groups (the batch-norm γ and β after
// a convolution, see Couple and nn.ConvNorms) to the filter groups, so a
// zero group is a zero channel.
//
// LazyProx applies the regularizers of some groups lazily: the update above
// without the prox steps a real-valued iterate z, and the network computes
// with θ_t = prox_{η_t λ R}(z_t), η_t the step sizes summed so far, per
// coordinate under the preconditioned metric (the regularized dual
// averaging form). Where the eager map holds a weight at
// a minimiser of R (a zero, a binary well ±s) until one step's gradient
// outweighs the pull, the lazy one lets it go as soon as the accumulated
// gradient does; BinaryConnect is its W-shaped limit λ → ∞.
//
// Baselines with the same Optimizer interface: SGD (heavy-ball momentum,
// Nesterov, weight decay), Adam, AdamW, AdaGrad and RMSprop (all as ProxGen
// configurations without a regularizer), subgradient methods (RegMode
// Subgradient), Prox-SGD (Yang et al. 2020, two-stage update), the original
// ProxQuant (Euclidean prox metric plus clipping) and BinaryConnect.
package optim
