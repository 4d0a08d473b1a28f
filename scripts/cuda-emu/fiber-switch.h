// The x86-64 context switch the host emulators share (emu.h, grid-emu.h): emu_switch(from, to)
// saves the callee-saved registers on the current stack, stores the stack pointer in *from and
// resumes the context whose stack pointer is `to`.
#pragma once
extern "C" void emu_switch(void** from, void* to);
asm(R"(
.text
.globl emu_switch
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)");
