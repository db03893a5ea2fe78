# placeholder: replaced by the CUTLASS locator
